package net

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
	switch {
	case !l.draining:
	case c.cut:
		l.stats.cut.Add(1)
	default:
		l.stats.drained.Add(1)
	}
}
