package net

// The handler callbacks, each shielded so that a panic closes only its
// connection: the loop logs it with its stack, counts it in Stats.Panics
// and aborts the connection with ErrHandlerPanic.

import (
	"fmt"
	"runtime/debug"
)

func (l *Loop) callOpen(c *Conn) {
	defer l.recoverHandler(c, "OnOpen")
	c.h.OnOpen(c)
}

func (l *Loop) callData(c *Conn) {
	defer l.recoverHandler(c, "OnData")
	c.h.OnData(c)
}

func (l *Loop) callEOF(c *Conn, eh EOFHandler) {
	defer l.recoverHandler(c, "OnEOF")
	eh.OnEOF(c)
}

func (l *Loop) callClose(c *Conn) {
	defer l.recoverHandler(c, "OnClose")
	c.h.OnClose(c, c.err)
}

func (l *Loop) recoverHandler(c *Conn, where string) {
	r := recover()
	if r == nil {
		return
	}
	l.stats.panics.Add(1)
	l.log.Error("veloq: handler panicked; closing its connection",
		"callback", where, "panic", r, "stack", string(debug.Stack()))
	c.view = nil
	l.abort(c, fmt.Errorf("%w in %s: %v", ErrHandlerPanic, where, r))
}
