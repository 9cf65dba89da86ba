package http

import "expvar"

// PublishExpvar publishes s's counters (Stats) as the expvar variable
// name, so that expvar.Handler, served at /debug/vars by importing expvar
// into a program that serves net/http's DefaultServeMux, shows them as
// JSON. The counters are read afresh on every request to the handler.
//
// Like expvar.Publish, which it calls, PublishExpvar panics when name is
// already published: variables are published once, at start-up, and a
// name used twice is a mistake to stop the program on rather than an
// error to handle (expvar offers no way to unpublish, so a caller could
// not do anything else with the error). Give each server a name of its
// own.
func PublishExpvar(name string, s *Server) {
	expvar.Publish(name, expvar.Func(func() any { return s.Stats() }))
}
