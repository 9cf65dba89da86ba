package client

import (
	"errors"
	"time"
)

// Draining a cancelled call's response. A call cancelled on HTTP/1 leaves
// its connection in the middle of an exchange: the response, or its rest,
// is still to come, so the connection cannot carry another request until
// it has. Closing it is always safe, and is what nginx does (it pools an
// upstream connection only once the response was read whole); but when a
// load generator stops, or many clients leave at once, every cancelled
// call then costs a new connection to the upstream for the next request:
// wrk -c64 stopping after its warm-up made the proxy dial 56 more
// connections to nginx for the run that followed (1 MiB answers; 43 with
// h2load -c16 -m4 and 16 KiB ones). When the rest is short the
// connection reads it and discards it instead, and goes back to the pool.

// Bounds of a drain: the rest of the response, read and discarded, is at
// most maxDrainBytes of body, one receive buffer of the proxy's (more is
// cheaper to drop than to read: a new loopback connection costs about what
// copying 64 KiB does), and it comes within drainTimeout, or the
// connection is closed.
const maxDrainBytes = 64 << 10

const drainTimeout = time.Second

// errDrain ends a drain that cannot finish within its bounds: the
// connection is closed, as it would have been without the drain. No
// caller sees it.
var errDrain = errors.New("client: the rest of a cancelled response is too long to drain")

// drainHandler is the handler of a drain's call: it discards the
// response.
type drainHandler struct{}

func (drainHandler) OnResponseHead(*Call, *ResponseHead) {}
func (drainHandler) OnResponseBody(*Call, []byte)        {}
func (drainHandler) OnResponseEnd(*Call, []Field, error) {}

// drainRest hands call's connection, as call is cancelled, to a new call
// that reads the rest of the response and discards it, and pools the
// connection once it is complete; it reports whether it did. It does
// when the request is written whole (a body still being written would
// leave the upstream waiting for it), the connection is established, and
// the response has not begun, or its body, framed by Content-Length, has
// at most maxDrainBytes to come. A head still to come is checked when it
// arrives (readHead): a body that is chunked, delimited by the close or
// longer than the bound ends the drain, and the connection is closed.
func (call *Call) drainRest() bool {
	pc := call.pc
	if !pc.opened || call.bodySending() || call.ls.cl.closed.Load() {
		return false
	}
	switch {
	case call.ph == phaseWaiting && call.head.Status != 101: // 101: a tunnel's
	case call.ph == phaseBody && call.ph2.frame == frameLength && call.remaining <= maxDrainBytes:
	default:
		return false
	}
	d := call.ls.newCall(drainHandler{})
	d.up, d.pc, d.ph, d.drain = call.up, pc, call.ph, true
	d.headReq, d.ph2, d.remaining, d.started = call.headReq, call.ph2, call.remaining, call.started
	pc.call = d
	call.pc = nil
	pc.draining = true
	call.up.drains = append(call.up.drains, pc)
	call.up.st.draining.Add(1)
	if call.paused {
		pc.c.ResumeRead() // presents what is buffered, then reads on
	}
	if d.ph == phaseBody && d.remaining == 0 {
		// Cancelled in the handler of the body's last part: nothing is
		// left to read.
		d.complete(pc, pc.c, nil)
		return true
	}
	pc.arm(call.ls.cl.o.drainTimeout)
	if !call.paused {
		// Input left unread when call was cancelled from its handler: the
		// loop keeps it once that callback returns.
		call.ls.loop.Defer(pc.c.Redeliver)
	}
	return true
}

// drainHead checks the head a drain just read: it reports whether the
// rest of the response is short enough to read, and ends the drain,
// closing the connection, if not.
func (call *Call) drainHead(pc *pconn) bool {
	if call.ph2.frame == frameNone || call.ph2.frame == frameLength && call.remaining <= maxDrainBytes {
		return true
	}
	pc.fail(errDrain)
	return false
}

// dropDrain takes pc, which no longer drains (its response was read, or
// it closed), off the upstream's list of draining connections.
func (u *upstream) dropDrain(pc *pconn) {
	pc.draining = false
	u.st.draining.Add(-1)
	for i, p := range u.drains {
		if p == pc {
			n := len(u.drains) - 1
			copy(u.drains[i:], u.drains[i+1:])
			u.drains[n] = nil
			u.drains = u.drains[:n]
			return
		}
	}
}

// preemptDrain closes a draining connection for a call that waits for
// one: a drain must not make a request wait (the connection still counts
// against WithMaxConnsPerHost).
func (u *upstream) preemptDrain() {
	if len(u.drains) > 0 && u.head != nil {
		u.drains[0].fail(errDrain)
	}
}
