package http

import (
	"slices"
	"sync"
)

// maxIdleStdWorkers bounds the goroutines a loop keeps parked for its
// next FromStd requests. A loop hands out a batch of requests at a time
// (64 connections' worth under wrk -c64), so fewer would send part of
// every batch to fresh goroutines; more only holds memory: a parked worker
// keeps its stack (2-8 KiB, halved by each GC while it idles).
const maxIdleStdWorkers = 128

// stdWorkers runs a loop's FromStd handlers (by default, with no pool
// option) on goroutines that outlive their request. A goroutine started
// per request begins on a 2 KiB stack and grows it at once (net/http's
// ServeMux alone needs more), and each growth copies the stack after
// walking its frames' tables: callgrind put that at 14,000 of the 30,000
// instructions a FromStd request cost the server, more than the rest of
// the adapter. A worker that ran a handler keeps its grown stack for the
// next one, as net/http's goroutine per connection does.
//
// It never queues: a request finds an idle worker or starts a new one, so
// handlers that block cost a goroutine each and cannot starve the others.
// The loop takes idle workers; a worker makes itself idle again when its
// handler returns (or exits if maxIdleStdWorkers wait already). Idle
// workers exit when the server shuts down.
type stdWorkers struct {
	done <-chan struct{} // the server's: closed when it shuts down
	mu   sync.Mutex
	idle []*stdWorker // a stack: the last to finish has the warmest stack
}

// A stdWorker is one goroutine of stdWorkers.
type stdWorker struct {
	ws   *stdWorkers
	next chan *stdExchange // capacity 1: the loop never waits on it
}

// run runs x's handler on an idle worker, or on a new one if none is idle.
func (ws *stdWorkers) run(x *stdExchange) {
	ws.mu.Lock()
	if n := len(ws.idle); n > 0 {
		w := ws.idle[n-1]
		ws.idle[n-1] = nil
		ws.idle = ws.idle[:n-1]
		ws.mu.Unlock()
		w.next <- x
		return
	}
	ws.mu.Unlock()
	w := &stdWorker{ws: ws, next: make(chan *stdExchange, 1)}
	go w.serve(x)
}

// serve runs handlers until the worker is not wanted any more.
func (w *stdWorker) serve(x *stdExchange) {
	for x != nil {
		x.run()
		x = w.park()
	}
}

// park makes w idle and returns its next request, or nil if w should
// exit: enough workers are idle, or the server is shutting down.
func (w *stdWorker) park() *stdExchange {
	ws := w.ws
	ws.mu.Lock()
	if len(ws.idle) >= maxIdleStdWorkers || isClosed(ws.done) {
		ws.mu.Unlock()
		return nil
	}
	ws.idle = append(ws.idle, w)
	ws.mu.Unlock()
	select {
	case x := <-w.next:
		return x
	case <-ws.done:
	}
	ws.mu.Lock()
	for i, v := range ws.idle {
		if v == w {
			ws.idle = slices.Delete(ws.idle, i, i+1)
			ws.mu.Unlock()
			return nil
		}
	}
	ws.mu.Unlock()
	// The loop took w off the stack before the shutdown was seen: a
	// request is on its way and must run.
	return <-w.next
}

// isClosed reports whether c is closed.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
