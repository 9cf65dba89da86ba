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
	// OnClose runs once when the connection is gone. err is nil for a close
	// the handler asked for, io.EOF when the peer closed and the handler does
	// not implement EOFHandler, and the cause otherwise.
	OnClose(c *Conn, err error)
}

// EOFHandler is implemented by handlers that want the peer's half-close
// (FIN) instead of an automatic close. After OnEOF the connection can still
// write; the handler calls Close or CloseWrite when it is done.
type EOFHandler interface {
	OnEOF(c *Conn)
}

// HandlerFuncs adapts plain functions to Handler (and EOFHandler when EOF is
// set). Nil fields do nothing, except that a nil EOF means "close on FIN".
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

// OnEOF calls h.EOF, or closes c when h.EOF is nil.
func (h *HandlerFuncs) OnEOF(c *Conn) {
	if h.EOF != nil {
		h.EOF(c)
		return
	}
	c.Close()
}
