package http

import "sync"

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
// workers exit when the server shuts down (close).
type stdWorkers struct {
	mu     sync.Mutex
	idle   []*stdWorker // a stack: the last to finish has the warmest stack
	closed bool         // the server is shutting down: no worker parks
}

// A stdWorker is one goroutine of stdWorkers.
type stdWorker struct {
	ws *stdWorkers
	// next brings the worker its next request, or nil to exit. Its
	// capacity is 1 and only the one who took the worker off the idle
	// stack sends, once: no sender ever waits.
	next chan *stdExchange
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
// exit: enough workers are idle, or the server is shutting down. It waits
// on its channel alone: a select with the server's done channel cost
// 700 instructions per request (callgrind), a fifth of the hand-off.
func (w *stdWorker) park() *stdExchange {
	ws := w.ws
	ws.mu.Lock()
	if len(ws.idle) >= maxIdleStdWorkers || ws.closed {
		ws.mu.Unlock()
		return nil
	}
	ws.idle = append(ws.idle, w)
	ws.mu.Unlock()
	return <-w.next
}

// close makes the idle workers exit, and those still running exit when
// their handlers return: the server is shutting down. A request that
// arrives meanwhile (one pipelined before the shutdown) still runs, on a
// new goroutine.
func (ws *stdWorkers) close() {
	ws.mu.Lock()
	ws.closed = true
	idle := ws.idle
	ws.idle = nil
	ws.mu.Unlock()
	for _, w := range idle {
		w.next <- nil
	}
}
