package net

// The handler callbacks, each shielded so that a panic closes only its
// connection: the loop logs it with its stack (at most once a second per
// loop; the others are counted), counts it in Stats.Panics and aborts the
// connection with ErrHandlerPanic. Each call is also marked as user code
// (enterUser/leaveUser), which is what the off-loop check of Conn's
// methods and the blocked-loop watchdog read.

import (
	"fmt"
	"time"

	"github.com/veloq/veloq/internal/panicstack"
)

func (l *Loop) callOpen(c *Conn) {
	outer := l.enterUser()
	defer l.leaveHandler(c, "OnOpen", outer)
	c.h.OnOpen(c)
	if l.draining && c.state == connOpen {
		// Opened during a graceful Shutdown (a TLS handshake that
		// completed, a Loop.Dial): it is told at once, as the others were.
		l.callShutdown(c)
	}
}

func (l *Loop) callShutdown(c *Conn) {
	sh, ok := c.h.(ShutdownHandler)
	if !ok {
		return
	}
	c.drain |= drainTold
	l.told.Add(1)
	if c.wrShut {
		l.untell(c) // half-closed already: its handler has said all it will
	}
	outer := l.enterUser()
	defer l.leaveHandler(c, "OnShutdown", outer)
	sh.OnShutdown(c)
}

func (l *Loop) callData(c *Conn) {
	outer := l.enterUser()
	defer l.leaveHandler(c, "OnData", outer)
	c.h.OnData(c)
}

func (l *Loop) callEOF(c *Conn, eh EOFHandler) {
	outer := l.enterUser()
	defer l.leaveHandler(c, "OnEOF", outer)
	eh.OnEOF(c)
}

func (l *Loop) callClose(c *Conn) {
	outer := l.enterUser()
	defer l.leaveHandler(c, "OnClose", outer)
	c.h.OnClose(c, c.err)
}

// leaveHandler ends a handler callback: it recovers a panic, and reports
// the callback if the watchdog saw it block the loop.
func (l *Loop) leaveHandler(c *Conn, where string, outer bool) {
	r := recover()
	if outer {
		l.leaveUser(func() string { return where + " of " + describe(c) })
	}
	if r == nil {
		return
	}
	l.logPanic(where, fmt.Sprintf("%T", c.h), "closing its connection", r, panicstack.Capture())
	c.view = nil
	l.abort(c, fmt.Errorf("%w in %s: %v", ErrHandlerPanic, where, r))
}

// describe names the user code c's handler runs: the handler's own
// answer when it is a Describer (an adapter such as the HTTP server's),
// else its type.
func describe(c *Conn) string {
	if d, ok := c.h.(Describer); ok {
		if s := d.Describe(c); s != "" {
			return s
		}
	}
	return fmt.Sprintf("%T", c.h)
}

// panicLogEvery bounds panic logging: a handler that panics on every
// request must not turn the log into the bottleneck.
const panicLogEvery = time.Second

// logPanic counts a recovered panic and logs it with its stack (one
// attribute per frame: see internal/panicstack) and what the loop does
// about it (then, e.g. "closing its connection"; empty when nothing more),
// at most once per panicLogEvery; the line says how many were not logged
// since.
func (l *Loop) logPanic(where, kind, then string, r any, stack panicstack.Stack) {
	l.stats.panics.Add(1)
	now := l.clock()
	if l.lastPanicLog != 0 && now-l.lastPanicLog < int64(panicLogEvery) {
		l.panicsUnlogged++
		return
	}
	l.lastPanicLog = now
	msg := "veloq: handler panicked"
	if then != "" {
		msg += "; " + then
	}
	l.log.Error(msg,
		"callback", where, "handler", kind, "panic", r,
		"unlogged_since_last", l.panicsUnlogged, "stack", stack)
	l.panicsUnlogged = 0
}
