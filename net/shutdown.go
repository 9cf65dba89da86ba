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
	drainDone                        // ... and it has closed or shut its write side since
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

// NumNotified returns the connections OnShutdown was called on whose
// handler has not ended them yet: not closed, and not half-closed
// (CloseWrite) either, which says all that the handler had to say and
// waits only for the peer's FIN. These are the connections a protocol
// server's graceful shutdown can expect to end by themselves: vhttp's
// Shutdown waits for such hijacked ones, the WebSocket connections in
// their close handshake (once both close frames have crossed, a
// WebSocket half-closes and lingers up to its close timeout for the
// client's FIN, which a deploy need not wait for).
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
	for i, n := uint32(0), uint32(l.conns.len()); i < n; i++ {
		if c := l.conns.get(i); c != nil && c.state == connOpen {
			l.callShutdown(c)
		}
	}
}

// countDrain counts a finalized connection as drained or cut if a
// graceful shutdown is under way.
func (l *Loop) countDrain(c *Conn) {
	l.untell(c)
	switch {
	case !l.draining:
	case c.drain&drainCut != 0:
		l.stats.cut.Add(1)
	default:
		l.stats.drained.Add(1)
	}
}

// untell takes c out of NumNotified once its handler has ended it (Close,
// CloseWrite) or it is gone.
func (l *Loop) untell(c *Conn) {
	if c.drain&(drainTold|drainDone) == drainTold {
		c.drain |= drainDone
		l.told.Add(-1)
	}
}
