package net

// Handler receives a connection's events. Every method runs on the
// connection's loop goroutine, one at a time per loop, and must not block:
// hand blocking or CPU-heavy work to the executor and come back with
// Loop.Post.
type Handler interface {
	// OnOpen runs once when the connection is established (accepted, or an
	// outbound dial connected), before any OnData.
	OnOpen(c *Conn)
	// OnData runs when new input arrived. The handler consumes what it can
	// with Next, Peek/Discard or Read; what it leaves stays buffered and is
	// presented again, with more input, on the next OnData.
	OnData(c *Conn)
	// OnClose runs once when the connection is gone. err says why, by one
	// rule for every handler shape:
	//   - nil: the handler closed it (Close, or CloseWrite after the peer's
	//     FIN);
	//   - io.EOF: the peer closed (FIN) and the connection was closed for it,
	//     because the handler has no OnEOF (see EOFHandler);
	//   - otherwise the cause: ErrClosed when the server or loop stopped, a
	//     reset, ErrIdleTimeout, ErrInputTooLarge, ErrHandlerPanic, ...
	// LocalAddr and RemoteAddr still answer inside OnClose.
	OnClose(c *Conn, err error)
}

// EOFHandler is implemented by handlers that want the peer's half-close
// (FIN) instead of an automatic close.
//
// The half-close rule: without OnEOF, the peer's FIN closes the connection
// (gracefully: output already written is still sent, then OnClose(io.EOF)),
// so nothing written after the FIN reaches the peer. That is right for a
// request/response server, and wrong for a relay or proxy: a client that
// sends its request and half-closes (printf ... | nc -q1, shutdown(SHUT_WR))
// still waits for the answer that another connection will bring. Such a
// handler implements OnEOF (HandlerFuncs: sets EOF) and calls CloseWrite on
// the other side, then Close once both directions are done. After OnEOF the
// connection can still write; when both directions have been shut down
// (the peer's FIN and the handler's CloseWrite) it closes by itself with
// OnClose(nil).
type EOFHandler interface {
	OnEOF(c *Conn)
}

// Describer is implemented by a Handler that adapts user code, such as a
// protocol layer's handler, to say which user code a connection runs. The
// blocked-loop warning (see Config.BlockThreshold) names the callback by
// Describe's answer instead of by the Handler's type, which for such an
// adapter would be the same for every program: the HTTP server answers
// with the route pattern that matched or the type of the handler the
// server was given, the WebSocket layer with the type of the connection's
// websocket handler.
//
// Describe runs on c's loop, right after the callback that blocked
// returns, and only then: it may read the connection's state, and what
// it costs does not matter to a loop that is not stalling.
type Describer interface {
	Describe(c *Conn) string
}

// HandlerFuncs adapts plain functions to Handler (and EOFHandler). Nil
// fields do nothing, except that a nil EOF means "close on FIN": the
// connection closes and Close gets io.EOF, exactly as for a Handler without
// OnEOF.
type HandlerFuncs struct {
	Open  func(c *Conn)
	Data  func(c *Conn)
	Close func(c *Conn, err error)
	EOF   func(c *Conn)
}

// OnOpen calls h.Open.
func (h *HandlerFuncs) OnOpen(c *Conn) {
	if h.Open != nil {
		h.Open(c)
	}
}

// OnData calls h.Data.
func (h *HandlerFuncs) OnData(c *Conn) {
	if h.Data != nil {
		h.Data(c)
	}
}

// OnClose calls h.Close.
func (h *HandlerFuncs) OnClose(c *Conn, err error) {
	if h.Close != nil {
		h.Close(c, err)
	}
}

// OnEOF calls h.EOF, or closes c for the peer's FIN (OnClose sees io.EOF)
// when h.EOF is nil.
func (h *HandlerFuncs) OnEOF(c *Conn) {
	if h.EOF != nil {
		h.EOF(c)
		return
	}
	c.loop.closeOnEOF(c)
}
