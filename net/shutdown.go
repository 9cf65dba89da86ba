package net

import "sync"

// Graceful shutdown: what Server.Shutdown does on each loop between
// closing the listeners and stopping the loops.

// ShutdownHandler is implemented by handlers that end their connections
// their own way when the server shuts down gracefully: a goodbye message,
// a protocol's own close (the WebSocket layer sends a close frame 1001,
// going away), finishing the exchange in progress and then Close.
//
// Server.Shutdown calls OnShutdown once on every open connection, on the
// connection's loop, right after it stops accepting; a connection that
// opens afterwards (a TLS handshake that completes, an outbound dial)
// gets it right after OnOpen. Shutdown then waits until the connections
// close or its context ends, when it closes what remains (OnClose sees
// ErrClosed; Stats counts them as Cut). A handler without OnShutdown is
// left alone until then: it may watch for the server's end itself.
type ShutdownHandler interface {
	OnShutdown(c *Conn)
}

// drainFlags record a connection's part in a graceful Shutdown.
type drainFlags uint8

const (
	drainTold drainFlags = 1 << iota // OnShutdown was called on it
	drainCut                         // closed at Shutdown's deadline
)

// NotifyShutdown is part of the engine, for a protocol server that runs
// its own graceful shutdown (vhttp's Shutdown does; Server.Shutdown calls
// it itself): it calls OnShutdown on every open connection of every loop
// whose handler is a ShutdownHandler, and on every connection that opens
// afterwards, and returns once the loops have done so. From then on,
// connections that close count in Stats.Drained (or Stats.Cut when
// Shutdown closes them at its deadline). It stops nothing: call
// CloseListeners before it. It must not be called from a loop. Calls
// after the first do nothing.
func (s *Server) NotifyShutdown() {
	var wg sync.WaitGroup
	for _, l := range s.loops {
		wg.Add(1)
		if l.Post(func() { l.beginDrain(); wg.Done() }) != nil {
			wg.Done() // the loop stopped: nothing to tell
		}
	}
	wg.Wait()
}

// NumNotified returns the connections OnShutdown was called on that are
// still open: those a protocol server's graceful shutdown can expect to
// end by themselves (vhttp's Shutdown waits for such hijacked ones, the
// WebSocket connections closing with 1001).
func (s *Server) NumNotified() int {
	n := int64(0)
	for _, l := range s.loops {
		n += l.told.Load()
	}
	return int(n)
}

// beginDrain tells every open connection that the server is shutting
// down; from now on connections that close count in Stats.Drained (or
// Stats.Cut when beginStop closes them).
func (l *Loop) beginDrain() {
	if l.draining || l.stopping {
		return
	}
	l.draining = true
	// Indexed over a copy of the length: OnShutdown may close connections
	// (freeing slots) or dial (growing l.conns); the latter are told in
	// callOpen.
	for i, n := 0, len(l.conns); i < n; i++ {
		if c := l.conns[i]; c != nil && c.state == connOpen {
			l.callShutdown(c)
		}
	}
}

// countDrain counts a finalized connection as drained or cut if a
// graceful shutdown is under way.
func (l *Loop) countDrain(c *Conn) {
	if c.drain&drainTold != 0 {
		l.told.Add(-1)
	}
	switch {
	case !l.draining:
	case c.drain&drainCut != 0:
		l.stats.cut.Add(1)
	default:
		l.stats.drained.Add(1)
	}
}
