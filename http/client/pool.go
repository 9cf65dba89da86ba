package client

// The per-loop pools. Everything here runs on one loop: a loopState and
// its upstreams, connections and calls belong to that loop, so nothing is
// locked; only the counters Stats reads are atomics, each written by its
// loop alone.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"time"

	"github.com/veloq/veloq/http/internal/h1"
	vnet "github.com/veloq/veloq/net"
)

// upKey names an upstream: its address and whether it speaks TLS.
type upKey struct {
	addr string
	tls  bool
	h2   bool // Request.Proto is ProtoHTTP2
}

// loopState is one loop's share of a Client.
type loopState struct {
	loop *vnet.Loop
	cl   *Client
	ups  map[upKey]*upstream
	last *upstream // the one upstream returned last: see upstream
	free []*Call   // ended calls, for reuse
}

// maxFreeCalls bounds the ended calls a loop keeps for reuse.
const maxFreeCalls = 1024

// maxKeptBuf bounds the request buffer an ended call keeps.
const maxKeptBuf = 64 << 10

func (ls *loopState) newCall(h ResponseHandler) *Call {
	var call *Call
	if n := len(ls.free); n > 0 {
		call = ls.free[n-1]
		ls.free = ls.free[:n-1]
	} else {
		call = &Call{ls: ls}
		call.chunk.Limits.MaxBodyBytes = math.MaxInt64
		call.chunk.Limits.MaxHeaders = ls.cl.o.maxFields
		call.chunk.Limits.MaxHeaderBytes = ls.cl.o.maxHead
	}
	call.h = h
	call.fw, _ = h.(BodyForwarder)
	call.ph = phaseQueued
	return call
}

func (ls *loopState) recycle(call *Call) {
	buf, fields, trailer := call.buf[:0], call.head.Fields[:0], call.trailer[:0]
	if cap(buf) > maxKeptBuf {
		buf = nil
	}
	lim := call.chunk.Limits
	*call = Call{ls: ls, buf: buf, trailer: trailer}
	call.head.Fields = fields
	call.chunk.Limits = lim
	if len(ls.free) < maxFreeCalls {
		ls.free = append(ls.free, call)
	}
}

// endLater ends call with err from a deferred task: Send and Cancel never
// call the handler before they return.
func (ls *loopState) endLater(call *Call, err error, addr string) {
	call.ph = phaseEnding
	call.endErr = &Error{Addr: addr, ResponseStarted: call.started, Err: err}
	ls.loop.Defer(call.endDeferred)
}

func (call *Call) endDeferred() { call.end(nil, call.endErr) }

// end delivers OnResponseEnd and recycles the call. It is the last thing
// done with the call.
func (call *Call) end(trailer []Field, err error) {
	if err != nil && call.up != nil && !call.drain {
		call.up.st.countEnd(err)
	}
	ls := call.ls
	defer ls.recycle(call) // even if the handler panics
	if f := call.body.wait; f != nil {
		call.body.wait = nil
		f(net.ErrClosed)
	}
	call.h.OnResponseEnd(call, trailer, err)
}

func (ls *loopState) upstream(addr string, tls, h2 bool) *upstream {
	k := upKey{addr, tls, h2}
	// The upstream returned last is compared first: a loop sends to one
	// upstream, or to a few in turn, and hashing the key for the map
	// cost 190 instructions per request (callgrind, cmd/veloq-proxy
	// -backend epoll). No upstream is ever removed from ups.
	if u := ls.last; u != nil && u.key == k {
		return u
	}
	if u := ls.ups[k]; u != nil {
		ls.last = u
		return u
	}
	u := &upstream{ls: ls, key: k}
	ls.ups[k] = u
	ls.last = u
	c := ls.cl
	c.mu.Lock()
	c.ups = append(c.ups, u)
	c.mu.Unlock()
	return u
}

// closeIdle closes the idle connections (Client.Close).
func (ls *loopState) closeIdle() {
	for _, u := range ls.ups {
		u.closeIdleH2()
		for len(u.idle) > 0 {
			pc := u.popIdle()
			pc.c.Close()
		}
	}
}

// upstream is one loop's pool of connections to one upstream.
type upstream struct {
	ls   *loopState
	key  upKey
	open int      // connections, dialing or open
	idle []*pconn // LIFO: the most recently used first, so extra ones time out
	head *Call    // FIFO of calls waiting for a connection
	tail *Call    //
	nq   int      //
	st   upStats  //

	drains []*pconn // connections draining a cancelled call's response (drain.go)

	h2conns []*h2conn // HTTP/2 upstream: its connections, dialing or open
	h1only  bool      // HTTP/2 over TLS: the server did not pick "h2" by ALPN
	h2max   int       // streams per connection the server allowed last (0: not known yet)
}

// acquire gives call a connection: an idle one (unless fresh), a new one
// while under the bound, or a place in the queue.
func (u *upstream) acquire(call *Call, fresh bool) {
	if u.key.h2 {
		u.acquireH2(call)
		return
	}
	for !fresh && len(u.idle) > 0 {
		pc := u.popIdle()
		if pc.c.Closed() {
			continue // the loop saw it die; OnClose will account for it
		}
		u.st.reused.Add(1)
		pc.start(call)
		return
	}
	o := &u.ls.cl.o
	if u.open < o.maxConns {
		u.dial(call)
		return
	}
	u.enqueue(call)
	u.preemptDrain()
}

// enqueue puts call at the end of the wait queue, or fails it when the
// queue is full.
func (u *upstream) enqueue(call *Call) {
	if u.nq >= u.ls.cl.o.maxQueued {
		u.ls.endLater(call, ErrQueueFull, u.key.addr)
		return
	}
	call.ph = phaseQueued
	call.prev, call.next = u.tail, nil
	if u.tail != nil {
		u.tail.next = call
	} else {
		u.head = call
	}
	u.tail = call
	u.nq++
	u.st.queued.Add(1)
}

// unqueue takes call out of the wait queue.
func (u *upstream) unqueue(call *Call) {
	if call.prev != nil {
		call.prev.next = call.next
	} else {
		u.head = call.next
	}
	if call.next != nil {
		call.next.prev = call.prev
	} else {
		u.tail = call.prev
	}
	call.prev, call.next = nil, nil
	u.nq--
	u.st.queued.Add(-1)
}

// dial starts a connection for call; the request is written at once and
// sent when the connect completes.
func (u *upstream) dial(call *Call) {
	o := &u.ls.cl.o
	pc := &pconn{up: u}
	ctx, cancel := context.WithTimeout(context.Background(), o.dialTimeout)
	var err error
	if u.key.tls {
		pc.c, err = u.ls.loop.DialTLS(ctx, "tcp", u.key.addr, u.ls.cl.tlsConf, pc)
	} else {
		pc.c, err = u.ls.loop.Dial(ctx, "tcp", u.key.addr, pc)
	}
	cancel()
	if err != nil {
		u.ls.endLater(call, fmt.Errorf("%w: %w", ErrDial, err), u.key.addr)
		return
	}
	u.open++
	u.st.open.Add(1)
	u.st.newConns.Add(1)
	pc.start(call)
}

func (u *upstream) popIdle() *pconn {
	n := len(u.idle) - 1
	pc := u.idle[n]
	u.idle[n] = nil
	u.idle = u.idle[:n]
	u.st.idle.Add(-1)
	pc.idle = false
	pc.disarm()
	return pc
}

func (u *upstream) removeIdle(pc *pconn) {
	for i, p := range u.idle {
		if p == pc {
			copy(u.idle[i:], u.idle[i+1:])
			u.idle[len(u.idle)-1] = nil
			u.idle = u.idle[:len(u.idle)-1]
			u.st.idle.Add(-1)
			pc.idle = false
			return
		}
	}
}

// release takes back pc after a complete response: the next queued call
// gets it, else it waits in the idle list, or is closed past the bound.
func (u *upstream) release(pc *pconn) {
	if pc.draining {
		u.dropDrain(pc)
		u.st.drained.Add(1)
	}
	if call := u.head; call != nil {
		u.unqueue(call)
		u.st.reused.Add(1)
		pc.start(call)
		return
	}
	o := &u.ls.cl.o
	if len(u.idle) >= o.maxIdle || u.ls.cl.closed.Load() {
		pc.c.Close()
		return
	}
	pc.idle = true
	u.idle = append(u.idle, pc)
	u.st.idle.Add(1)
	pc.arm(o.idleTimeout)
}

// forget drops pc from the pool's count: it closed or was taken over.
// A queued call may now dial.
func (u *upstream) forget(pc *pconn) {
	if pc.gone {
		return
	}
	pc.gone = true
	pc.timer.Stop()
	if pc.draining {
		u.dropDrain(pc)
	}
	if pc.idle {
		u.removeIdle(pc)
	}
	u.open--
	u.st.open.Add(-1)
	if call := u.head; call != nil && u.open < u.ls.cl.o.maxConns {
		u.unqueue(call)
		u.dial(call)
	}
}

// pconn is a pooled connection: the vnet handler of an upstream
// connection.
type pconn struct {
	up     *upstream
	c      *vnet.Conn
	call   *Call // the call it serves; nil when idle
	timer  *vnet.Timer
	idle   bool
	gone   bool // forgotten by the pool
	served bool // a response came back on it: a request on it reuses it
	opened bool // connected (and for TLS, the handshake done)
	// draining: its call is a drain's, reading the rest of a cancelled
	// call's response (drain.go); pc is in its upstream's drains.
	draining bool
	// deadline is when the armed timeout (head or idle) expires, on the
	// loop's clock; 0 when none is. timerAt is when timer, if pending,
	// fires: no later than deadline, maybe earlier (see arm).
	deadline, timerAt int64
}

// start writes call's request on pc.
func (pc *pconn) start(call *Call) {
	pc.call = call
	call.pc = pc
	call.ph = phaseWaiting
	if _, err := pc.c.Write(call.buf); err != nil {
		pc.fail(fmt.Errorf("%w: %w", ErrUpstreamClosed, err))
		return
	}
	if call.paused {
		pc.c.PauseRead()
	}
	if call.bodySending() {
		// The head timeout starts when the body has gone (EndBody).
		call.checkBody()
		if pc.opened {
			call.nowConnected()
		}
		return
	}
	pc.arm(pc.up.ls.cl.o.headTimeout)
}

// arm starts pc's one timeout: the response-head timeout while a call
// waits, the idle timeout while idle. The timer is moved only when it
// would fire after the new deadline; one that fires early finds the
// deadline ahead and re-arms for the rest (onTimer). A keep-alive
// exchange thus costs no heap operation where it cost four (stop when
// taken from the idle list, arm for the head, stop at the head, arm for
// idle): 640 instructions per proxied request (callgrind,
// cmd/veloq-proxy -backend epoll to nginx).
func (pc *pconn) arm(d time.Duration) {
	l := pc.up.ls.loop
	pc.deadline = l.Clock() + int64(d)
	switch {
	case pc.timer == nil:
		pc.timer = l.AfterFunc(d, pc.onTimer)
	case pc.timer.Pending() && pc.timerAt <= pc.deadline:
		return
	default:
		pc.timer.Reset(d)
	}
	pc.timerAt = pc.deadline
}

// disarm cancels pc's timeout; its timer, if pending, fires and finds
// nothing to do, unless arm has set a new deadline by then.
func (pc *pconn) disarm() { pc.deadline = 0 }

func (pc *pconn) onTimer() {
	if pc.deadline == 0 {
		return
	}
	if now := pc.up.ls.loop.Clock(); now < pc.deadline {
		pc.timer.Reset(time.Duration(pc.deadline - now))
		pc.timerAt = pc.deadline
		return
	}
	pc.deadline = 0
	switch {
	case pc.gone:
	case pc.idle:
		pc.up.removeIdle(pc)
		pc.c.Close()
	case pc.call != nil && pc.call.drain:
		pc.fail(errDrain)
	case pc.call != nil && pc.call.ph == phaseWaiting:
		pc.fail(ErrTimeout)
	}
}

// fail ends pc's call with err, or retries it on a fresh connection when
// that is safe, and aborts pc.
func (pc *pconn) fail(err error) {
	call := pc.call
	pc.call = nil
	pc.up.forget(pc)
	pc.c.Abort(err)
	if call != nil {
		call.pc = nil
		call.connFailed(err, pc.served)
	}
}

// connFailed handles the loss of call's connection.
func (call *Call) connFailed(err error, reused bool) {
	if reused && !call.started && call.retryable && !call.retried && errors.Is(err, ErrUpstreamClosed) {
		call.retried = true
		call.up.st.retries.Add(1)
		call.up.acquire(call, true)
		return
	}
	call.ls.endLater(call, err, call.up.key.addr)
}

// fail ends call with err: its connection, if any, is closed.
func (call *Call) fail(err error) {
	switch {
	case call.hs.hc != nil:
		call.hs.hc.cancel(call)
	case call.pc != nil && err == ErrCanceled && call.drainRest():
		// The connection reads the rest of the response and is pooled.
	case call.pc != nil:
		pc := call.pc
		pc.call = nil
		call.pc = nil
		pc.up.forget(pc)
		pc.c.Abort(err)
	case call.ph == phaseQueued && call.up != nil && (call.prev != nil || call.up.head == call):
		call.up.unqueue(call)
	}
	addr := ""
	if call.up != nil {
		addr = call.up.key.addr
	}
	call.ls.endLater(call, err, addr)
}

// OnOpen: the request was written when the connection was made; it is
// sent now, and a streamed body's writer waiting for the connection
// (WhenConnected) goes on.
func (pc *pconn) OnOpen(c *vnet.Conn) {
	pc.opened = true
	if call := pc.call; call != nil {
		call.nowConnected()
	}
}

// OnData parses the response of pc's call; input while idle is a
// protocol violation (nothing was asked), so the connection is dropped.
func (pc *pconn) OnData(c *vnet.Conn) {
	call := pc.call
	if call == nil {
		pc.up.forget(pc)
		c.Abort(protoErr("data from the upstream on an idle connection"))
		return
	}
	call.onData(pc, c)
}

// OnEOF: the upstream's FIN. An idle connection is dropped; a call
// reading a close-delimited body is complete; any other call fails.
func (pc *pconn) OnEOF(c *vnet.Conn) {
	call := pc.call
	if call != nil && call.ph == phaseBody && call.ph2.frame == frameClose {
		pc.call = nil
		call.pc = nil
		pc.up.forget(pc)
		c.Close()
		call.end(nil, nil)
		return
	}
	if call != nil {
		pc.fail(ErrUpstreamClosed)
		return
	}
	pc.up.forget(pc)
	c.Close()
}

// OnClose: the connection is gone; a call still on it failed.
func (pc *pconn) OnClose(c *vnet.Conn, err error) {
	pc.up.forget(pc)
	if call := pc.call; call != nil {
		pc.call = nil
		call.pc = nil
		switch {
		case !pc.opened:
			err = fmt.Errorf("%w: %w", ErrDial, err)
		case err == nil:
			err = ErrUpstreamClosed
		case !errors.Is(err, ErrTimeout):
			err = fmt.Errorf("%w: %w", ErrUpstreamClosed, err)
		}
		call.connFailed(err, pc.served)
	}
}

// onData advances call's response with c's input.
func (call *Call) onData(pc *pconn, c *vnet.Conn) {
	for {
		in, _ := c.Peek(0)
		if len(in) == 0 {
			return
		}
		call.started = true
		switch call.ph {
		case phaseWaiting:
			if !call.readHead(pc, c, in) {
				return
			}
		case phaseBody:
			if call.paused || !call.readBody(pc, c, in) {
				return
			}
		default:
			return
		}
	}
}

// readHead parses a response head; it reports whether to go on.
func (call *Call) readHead(pc *pconn, c *vnet.Conn, in []byte) bool {
	o := &call.ls.cl.o
	n, err := parseResponseHead(in, parseLimits{o.maxHead, o.maxFields}, call.headReq, &call.head, &call.ph2)
	if err == errNeedMore {
		return false
	}
	if err != nil {
		pc.fail(err)
		return false
	}
	c.Discard(n)
	h := &call.head
	if h.Status < 200 && h.Status != 101 {
		// 100 Continue and other interim answers: the final one follows.
		if ih, ok := call.h.(InformationalHandler); ok {
			ih.OnInformational(call, h)
			return pc.call == call
		}
		return true
	}
	if !call.drain {
		pc.disarm() // a drain's deadline stays
	}
	pc.served = true
	switch call.ph2.frame {
	case frameLength:
		call.remaining = call.ph2.length
	case frameChunked:
		call.chunk.Reset()
	}
	if call.drain && h.Status != 101 && !call.drainHead(pc) {
		return false
	}
	call.ph = phaseBody
	if h.Status == 101 {
		call.ph = phaseWaiting // Hijack's window
	}
	call.h.OnResponseHead(call, h)
	if pc.call != call {
		if h.Status == 101 && call.pc == nil && call.ph == phaseWaiting {
			// Hijacked. What came after the head is kept by the loop when
			// this callback returns; present it to the new handler then
			// (Redeliver inside the callback would find nothing kept yet).
			if c.Buffered() > 0 {
				call.ls.loop.Defer(c.Redeliver)
			}
			call.end(nil, nil)
		}
		return false // cancelled in the callback
	}
	if h.Status == 101 {
		pc.call = nil
		call.pc = nil
		pc.up.forget(pc)
		c.Close()
		call.end(nil, nil)
		return false
	}
	if call.ph2.frame == frameNone || call.ph2.frame == frameLength && call.remaining == 0 {
		call.complete(pc, c, nil)
		return false
	}
	return true
}

// readBody delivers the next part of the body; it reports whether to go
// on.
func (call *Call) readBody(pc *pconn, c *vnet.Conn, in []byte) bool {
	switch call.ph2.frame {
	case frameLength:
		k := int(min(call.remaining, int64(len(in))))
		call.remaining -= int64(k)
		call.deliver(c, in, k)
		if pc.call != call {
			return false
		}
		if call.remaining == 0 {
			call.complete(pc, c, nil)
			return false
		}
		return true
	case frameChunked:
		n, data, done, err := call.chunk.Next(in)
		if done {
			trailer, terr := call.parseTrailer(call.chunk.Trailer(in))
			c.Discard(n)
			if terr != nil {
				pc.fail(terr)
				return false
			}
			call.complete(pc, c, trailer)
			return false
		}
		c.Discard(n)
		if err == h1.ErrNeedMore {
			return false
		}
		if err != nil {
			pc.fail(protoErr("chunked body: " + err.Error()))
			return false
		}
		call.h.OnResponseBody(call, data)
		return pc.call == call
	default: // frameClose
		call.deliver(c, in, len(in))
		return pc.call == call
	}
}

// deliver hands the next k bytes of c's input, in[:k], to the handler as
// a part of the body, and consumes them.
func (call *Call) deliver(c *vnet.Conn, in []byte, k int) {
	if call.fw == nil {
		c.Discard(k)
		call.h.OnResponseBody(call, in[:k:k])
		return
	}
	after := len(in) - k
	call.fw.OnResponseBodyFrom(call, c, k)
	if left := c.Buffered() - after; left > 0 {
		c.Discard(left)
	}
}

// parseTrailer splits a trailer section into fields (views).
func (call *Call) parseTrailer(block []byte) ([]Field, error) {
	t := call.trailer[:0]
	for len(block) > 0 {
		if !validFieldLine(block) {
			return nil, protoErr("malformed trailer field")
		}
		f, rest, ok := h1.NextField(block)
		if !ok {
			return nil, protoErr("malformed trailer field")
		}
		t = append(t, Field{Name: f.Name, Value: f.Value})
		block = rest
	}
	call.trailer = t
	return t, nil
}

// complete ends call after a whole response, and pools pc unless the
// response forbids it or bytes beyond the response's end are buffered
// (nothing was asked for them: taking them as the next response would be
// a desync).
func (call *Call) complete(pc *pconn, c *vnet.Conn, trailer []Field) {
	pc.call = nil
	call.pc = nil
	// A response that came before the request's body ended leaves the
	// rest of the body unsent: the connection cannot carry another.
	if call.ph2.keepAlive && c.Buffered() == 0 && !c.Closed() && !call.bodySending() {
		if call.paused {
			c.ResumeRead() // an idle connection must see the FIN
		}
		pc.up.release(pc)
	} else {
		pc.up.forget(pc)
		c.Close()
	}
	call.end(trailer, nil)
}
