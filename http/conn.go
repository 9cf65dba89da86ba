package http

import (
	"context"
	"log/slog"
	"math"
	nethttp "net/http"
	"time"

	"github.com/veloq/veloq/http/internal/h1"
	"github.com/veloq/veloq/http/internal/h2"
	"github.com/veloq/veloq/internal/panicstack"
	vnet "github.com/veloq/veloq/net"
)

// phase is where a connection is in its request cycle. It decides which
// timeout applies and what arriving input means.
type phase uint8

const (
	phaseIdle     phase = iota // between requests, nothing buffered
	phaseNew                   // accepted, not a byte yet: under the head timeout
	phaseHead                  // part of a request head has arrived
	phaseBody                  // head complete, body arriving into conn.body
	phaseStdBody               // a FromStd handler runs; its body streams to it
	phaseDetBody               // a detached answer runs; its body streams to OnBody
	phaseBusy                  // a handler runs off the loop; input waits
	phaseDraining              // closing after an answer; input is discarded
	phaseHijacked              // handed to another handler by Hijack
	phaseH2                    // an HTTP/2 connection: frames go to h2
)

// longPoll is how often a connection's timer looks at it when no deadline
// applies.
const longPoll = time.Minute

// conn is the server's state for one connection. It lives on the
// connection's loop; only the FromStd exchange crosses goroutines.
//
// What only a request in progress needs (the parser, the body being
// collected, the answer's framing, the completion record) is a reqState,
// embedded by pointer: taken from the loop's free list when a request's
// first byte arrives and given back when the connection goes idle with
// nothing buffered, as nginx frees its request buffers on keep-alive. An
// idle keep-alive connection so holds a 128-byte conn instead of a
// 576-byte one (bench/httpproxy.sh MODE=idle). The server is its loop
// state's (ls.srv), and a FromStd exchange in progress its stdConn's:
// fields of their own made the conn 144 bytes, the next size class.
type conn struct {
	ls         *loopState
	c          *vnet.Conn
	prev, next *conn

	pattern    string // the Router pattern of the last request handled
	phaseStart int64  // loop clock (Loop.Clock) when the phase began

	timerAt     int64 // when the loop's connTimers run onTimer (loop clock)
	lastPending int
	progressAt  int64

	h2   *h2Conn  // set in phaseH2
	stdc *stdConn // FromStd state, made for the first FromStd request
	// feedFn is cs.feedLater, made once for a connection that streams a
	// request body (a method value allocates); it outlives its requests,
	// so it is the connection's, not the request state's.
	feedFn func()

	// The request in progress, nil while none is: its fields are read
	// through the embedding only where a request is in progress.
	*reqState

	phase    phase
	eof      bool
	answered bool  // a response was completed (protoError: no preface any more)
	tpos     int32 // place in ls.timers' heap + 1; 0 while no timer is pending
}

// reqState is a connection's state while a request is in progress (see
// conn). Only its loop's connections use it, one at a time.
type reqState struct {
	parser parser
	dec    h1.ChunkedDecoder

	// A body that did not arrive with its head is collected here; the
	// head is copied to head meanwhile and parsed again at the end.
	head      []byte
	body      []byte
	bodyHeld  int64 // bytes of body capacity charged to srv.bodyBytes
	bodyAt    int64 // loop clock when body bytes last arrived
	rateFrom  int64 // loop clock when the minimum body rate began to count
	rateGot   int64 // body bytes received since rateFrom
	remaining int64 // Content-Length bytes still to come
	chunked   bool
	sent100   bool

	// The answer in progress, as the exchange's writeResponse or
	// writeHead left it, for end.
	outStarted  bool            // a streamed head went out
	outChunked  bool            // its body is chunked: end writes the last chunk
	outBody     bool            // its body may carry bytes
	outClose    bool            // the connection closes after it
	outTrailers *ResponseHeader // sent in the last chunk

	offCancel func() // cancels the offloaded request's context
	// dbody is the detached answer whose request body streams to it, in
	// phaseDetBody; keepAsked is whether its client asked to keep the
	// connection (serveStreamed).
	dbody     *detached
	keepAsked bool

	rec exchangeRecord // for the completion hook (completion.go)
}

// maxFreeReqStates bounds the request states a loop keeps for reuse: as
// many as its connections had requests in progress at once, up to this.
const maxFreeReqStates = 1024

// maxPending bounds the answers a serveLoop batch holds before queuing
// them (loopState.pend): sixteen pipelined answers of a few hundred bytes
// fit; a larger one is queued by itself, after those before it.
const maxPending = 16 << 10

// begin gives cs a request state if it has none.
func (cs *conn) begin() {
	if cs.reqState == nil {
		cs.takeState()
	}
}

// takeState gives cs a request state from the loop's free list, or a
// new one.
func (cs *conn) takeState() {
	ls := cs.ls
	if n := len(ls.reqFree); n > 0 {
		cs.reqState = ls.reqFree[n-1]
		ls.reqFree[n-1] = nil
		ls.reqFree = ls.reqFree[:n-1]
		return
	}
	rs := new(reqState)
	rs.parser.Limits = h1.Limits(cs.ls.srv.limits)
	if cs.ls.srv.streamRoot != nil {
		// The body's limit depends on its handler, known after the head:
		// serveLoop checks Content-Length then (streamedHead), which also
		// sets the chunked decoder's for each request.
		rs.parser.Limits.MaxBodyBytes = math.MaxInt64
	}
	rs.dec.Limits = h1.Limits(cs.ls.srv.limits)
	cs.reqState = rs
}

// release gives cs's request state back to the loop once its request
// ended (enterIdle): end, endBody and report left it clean. Only a state
// that nothing else may still reach comes here: no request in progress
// (no offloaded job, detached answer, file or FromStd body being sent),
// so nothing outside the connection holds a reference into it.
func (cs *conn) release() {
	rs := cs.reqState
	cs.reqState = nil
	rs.offCancel = nil // cleared by the offload or detached answer that set it
	rs.dbody, rs.keepAsked = nil, false
	if ls := cs.ls; len(ls.reqFree) < maxFreeReqStates {
		ls.reqFree = append(ls.reqFree, rs)
	}
}

// dropState cleans and releases the request state, if any, of a
// connection that leaves HTTP/1 between or during requests (a close, a
// hijack, HTTP/2): its body and head may be part way, its answer
// unfinished.
func (cs *conn) dropState() {
	rs := cs.reqState
	if rs == nil {
		return
	}
	cs.endBody() // the body budget's share, the buffers past their size
	rs.parser.Reset()
	rs.outStarted, rs.outChunked, rs.outClose, rs.outTrailers = false, false, false, nil
	rs.rec.pending = false // reported already, by the close if not before
	cs.release()
}

// now is the loop clock in nanoseconds; deadlines are kept on it.
func (cs *conn) now() int64 { return cs.c.Loop().Clock() }

// date returns the Date header value for the loop's current time.
func (cs *conn) date() []byte {
	if ls := cs.ls; cs.c.Loop().Clock() < ls.dateUntil {
		return ls.dates.Last()
	}
	return cs.newDate()
}

// newDate is date for a new wall-clock second, or the first request:
// until the loop clock passes the end of this second, the text it caches
// stands.
func (cs *conn) newDate() []byte {
	ls, l := cs.ls, cs.c.Loop()
	now := l.Now()
	date := ls.dates.Bytes(now)
	ls.dateUntil = l.Clock() + int64(time.Second) - int64(now.Nanosecond())
	ls.head200 = appendStart(ls.head200[:0], StatusOK, date, 0)
	ls.heads.ok = false // it holds the old Date
	ls.dateText = ""
	return date
}

// dateString is date as a string, made once per second (for HPACK, whose
// encoder takes strings).
func (cs *conn) dateString() string {
	date := cs.date()
	if ls := cs.ls; ls.dateText == "" {
		ls.dateText = string(date)
	}
	return cs.ls.dateText
}

// firstTimeout is when a new connection's timer first looks at it: the
// head timeout, which a connection that sends nothing runs out of.
func (s *Server) firstTimeout() time.Duration {
	switch {
	case s.opts.readHeaderTimeout > 0:
		return s.opts.readHeaderTimeout
	case s.opts.idleTimeout > 0:
		return s.opts.idleTimeout
	}
	return longPoll
}

// armAt makes the timer fire no later than deadline.
func (cs *conn) armAt(deadline int64) {
	// Inlined: every answer asks for its idle deadline, which the pending
	// timer nearly always covers.
	if cs.timerAt > deadline || cs.tpos == 0 {
		cs.rearm(deadline)
	}
}

// rearm makes the timer fire at deadline.
func (cs *conn) rearm(deadline int64) {
	cs.ls.timers.arm(cs, deadline)
}

// onTimer enforces the deadline of the current phase and the write
// timeout, then re-arms for the next check.
func (cs *conn) onTimer() {
	c := cs.c
	if c.Closed() {
		return
	}
	o := &cs.ls.srv.opts
	now := cs.now()
	next := int64(longPoll)
	var deadline int64
	switch cs.phase {
	case phaseIdle:
		if o.idleTimeout > 0 {
			deadline = cs.phaseStart + int64(o.idleTimeout)
		}
	case phaseNew, phaseHead:
		// A new connection's first head is due a head timeout after the
		// accept, as net/http's ReadHeaderTimeout: a client that connects
		// and says nothing holds its slot no longer than one that trickles
		// a head.
		deadline = cs.phaseStart + int64(o.readHeaderTimeout)
		if o.readHeaderTimeout <= 0 {
			deadline = 0
			if cs.phase == phaseNew && o.idleTimeout > 0 {
				deadline = cs.phaseStart + int64(o.idleTimeout)
			}
		}
	case phaseBody, phaseStdBody, phaseDetBody:
		if cs.waitingForBody() {
			deadline = cs.bodyDeadline()
			if deadline != 0 && now >= deadline {
				cs.ls.st.timeouts.Add(1)
				cs.bodyTimeout()
				return
			}
		}
	case phaseDraining:
		deadline = cs.phaseStart + int64(o.lingerTimeout)
	case phaseH2:
		deadline = cs.h2.deadline()
		if deadline != 0 && now >= deadline {
			cs.ls.st.timeouts.Add(1)
			cs.h2.timedOut()
			return
		}
	}
	if deadline != 0 {
		if now >= deadline {
			if cs.phase != phaseDraining {
				cs.ls.st.timeouts.Add(1)
			}
			c.Close()
			return
		}
		next = min(next, deadline-now)
	}
	if wt := int64(o.writeTimeout); wt > 0 {
		if p := c.OutputBuffered() + int(c.FilePending()); p > 0 {
			if cs.lastPending == 0 || p < cs.lastPending {
				cs.progressAt = now
			}
			cs.lastPending = p
			if now-cs.progressAt >= wt {
				// The peer stopped reading: a graceful close would wait for
				// that output too, so drop it.
				cs.ls.st.timeouts.Add(1)
				c.Abort(ErrWriteTimeout)
				return
			}
			next = min(next, max(wt/4, int64(time.Millisecond)))
		} else {
			cs.lastPending = 0
		}
	}
	cs.ls.timers.arm(cs, now+next)
}

func (cs *conn) onData() {
	switch cs.phase {
	case phaseDraining:
		cs.c.Discard(-1)
		return
	case phaseBusy:
		return // the input waits for the response in progress
	case phaseStdBody:
		cs.feedStd()
		return
	case phaseDetBody:
		cs.feedDetached()
		return
	case phaseBody:
		if !cs.readBody() {
			return
		}
	case phaseH2:
		cs.h2.onData()
		return
	}
	cs.serveLoop()
}

// serveLoop answers every complete request in the input, in order. All the
// responses are written before it returns, so they leave in one send.
func (cs *conn) serveLoop() {
	ls := cs.ls
	if ls.armed {
		cs.serveBatch()
		return
	}
	// One recover for the whole batch instead of a defer per request
	// (callHandler's): serve calls the handler straight, and a panic
	// unwinds to disarm, which answers it as callHandler would. The defer
	// and recover per request (callHandler, its deferred call,
	// recoverHandler, gorecover) cost 87 of the 2,582 instructions of a
	// pipelined request, 35 net of what replaced them (callgrind,
	// BenchmarkServerFastPath depth=16).
	// The defer is here, apart from serveBatch's many returns, so that it
	// is open-coded: deferproc and deferreturn cost 33 a batch.
	ls.armed, ls.inline, ls.batched = true, cs, 0
	defer ls.disarm(cs)
	if ls.pend == nil {
		ls.pend = make([]byte, 0, maxPending)
	}
	cs.serveBatch()
}

// serveBatch is serveLoop's loop.
func (cs *conn) serveBatch() {
	c := cs.c
	ls := cs.ls
	for {
		if c.Backlogged() {
			// The client is not reading its answers: the requests it
			// pipelined wait in the input (where reading has stopped) and
			// OnData brings them back once the output drains, so a
			// connection holds about the high-water mark plus one response,
			// however many requests it sends.
			return
		}
		buf, _ := c.Peek(0)
		if len(buf) == 0 {
			return
		}
		switch cs.phase {
		case phaseIdle:
			cs.phase = phaseHead
			cs.phaseStart = cs.now()
		case phaseNew:
			if cs.ls.srv.opts.h2c && isH2Preface(buf) {
				if len(buf) < len(h2.ClientPreface) {
					// A proper prefix of the preface ("P" of a POST sent a
					// byte at a time, or "PRI * HTTP/2.0\r\n") may still be
					// either: wait, under the head timeout, for the byte
					// that tells.
					return
				}
				// HTTP/2 with prior knowledge (RFC 9113 §3.3): the whole
				// preface is no HTTP/1 request a server answers (an
				// HTTP/1 server's answer would be 505), so nothing is lost.
				cs.startH2()
				cs.h2.onData()
				return
			}
			cs.phase = phaseHead // the head timeout runs from the accept
		}
		if cs.reqState == nil { // begin, which serveLoop is too big to inline
			cs.takeState()
		}
		req := &ls.req
		n, err := cs.parser.Parse(buf, req)
		if err != nil {
			if err == h1.ErrNeedMore {
				if rht := cs.ls.srv.opts.readHeaderTimeout; rht > 0 {
					cs.armAt(cs.phaseStart + int64(rht))
				}
				return
			}
			if err == errNotHTTPVersion && cs.mayBePreface() && !lineEnded(buf, cs.ls.srv.limits.maxHeaderBytes()) {
				// protoError judges the whole first line.
				if rht := cs.ls.srv.opts.readHeaderTimeout; rht > 0 {
					cs.armAt(cs.phaseStart + int64(rht))
				}
				return
			}
			cs.protoError(err)
			return
		}
		if req.Upgrade != nil && cs.ls.srv.opts.h2c && h1.EqualFold(req.Upgrade, "h2c") && !req.HasBody() {
			if settings, ok := req.Lookup("http2-settings"); ok {
				ls.flushPending()
				cs.upgradeH2(req, settings)
				c.Discard(n)
				return
			}
		}
		if cs.ls.srv.opts.completion != nil {
			cs.rec.begin(req, int64(n), cs.now())
			cs.pattern = ""
		}
		if s := cs.ls.srv; s.onHead {
			// One test for both root handlers that take a request on its
			// head: the collected path pays no more than before.
			if s.std != nil {
				c.Discard(n)
				ls.flushPending()
				cs.startStd(s.std, req, nil)
				return
			}
			if req.HasBody() && cs.streamedHead(req, n) {
				return
			}
		}
		total := n
		switch {
		case req.Chunked:
			cs.dec.Reset()
			cs.body = cs.body[:0]
			k, done, err := cs.decode(buf[n:])
			if err == errBodyBudget {
				return // answered by appendBody
			}
			if err != nil {
				cs.protoError(err)
				return
			}
			if !done {
				cs.rec.in += int64(k)
				cs.enterBody(req, buf[:n])
				c.Discard(n + k)
				return
			}
			req.Body = cs.body
			total = n + k
		case req.ContentLength > 0:
			end := n + int(req.ContentLength) // bounded by MaxBodyBytes
			if len(buf) < end {
				// The rest of the body is collected as it arrives; the
				// buffer grows with it rather than reserving ContentLength
				// for a client that may never send it.
				cs.body = cs.body[:0]
				if !cs.appendBody(buf[n:], req.ContentLength) {
					return
				}
				cs.remaining = req.ContentLength - int64(len(buf)-n)
				cs.rec.in += int64(len(buf) - n)
				cs.enterBody(req, buf[:n])
				c.Discard(len(buf))
				return
			}
			req.Body = buf[n:end:end]
			total = end
		}
		cs.rec.in = int64(total)
		if !cs.serve(req, total) {
			return
		}
	}
}

// streamedHead decides, under a root handler that may stream bodies, how
// the body of req (whose head is n bytes) is read: it serves the request
// and reports true when its handler streams the body; otherwise the body
// is collected, under the server's limit, which the parser left to this
// decision. An over-long Content-Length is answered 413 either way.
func (cs *conn) streamedHead(req *Request, n int) bool {
	limit, streams := cs.ls.srv.streamRoot.streamLimit(req)
	if !streams {
		limit = cs.ls.srv.limits.MaxBodyBytes
	}
	if req.ContentLength > limit {
		cs.protoError(errBodyTooLarge)
		return true
	}
	cs.dec.Limits.MaxBodyBytes = limit // a chunked body's, as it is decoded
	if !streams {
		return false
	}
	cs.c.Discard(n)
	cs.rec.in = int64(n)
	cs.serveStreamed(req)
	return true
}

// enterBody waits for the rest of req's body. The head is copied, since
// its bytes leave the connection's input.
func (cs *conn) enterBody(req *Request, head []byte) {
	cs.head = append(cs.head[:0], head...)
	cs.chunked = req.Chunked
	cs.phase = phaseBody
	cs.startBodyClock()
	if req.Expect100 && !cs.sent100 {
		cs.sent100 = true
		cs.ls.scratch = h1.AppendContinue(cs.ls.scratch[:0])
		cs.write(cs.ls.scratch)
	}
}

// decode runs the chunked decoder over in, collecting the body.
func (cs *conn) decode(in []byte) (consumed int, done bool, err error) {
	for {
		k, data, d, e := cs.dec.Next(in[consumed:])
		consumed += k
		if !cs.appendBody(data, 0) {
			return consumed, false, errBodyBudget
		}
		switch {
		case d:
			return consumed, true, nil
		case e == h1.ErrNeedMore:
			return consumed, false, nil
		case e != nil:
			return consumed, false, coreError(e)
		}
	}
}

// readBody collects more of a body; once it is complete it answers the
// request and reports true.
func (cs *conn) readBody() bool {
	c := cs.c
	buf, _ := c.Peek(0)
	if cs.chunked {
		k, done, err := cs.decode(buf)
		if err == errBodyBudget {
			return false // answered by appendBody
		}
		cs.bodyArrived(k)
		c.Discard(k)
		if err != nil {
			cs.protoError(err)
			return false
		}
		if !done {
			return false
		}
	} else {
		k := min(int64(len(buf)), cs.remaining)
		if !cs.appendBody(buf[:k], int64(len(cs.body))+cs.remaining) {
			return false
		}
		cs.bodyArrived(int(k))
		c.Discard(int(k))
		cs.remaining -= k
		if cs.remaining > 0 {
			return false
		}
	}
	req := &cs.ls.req
	if _, err := cs.parser.Parse(cs.head, req); err != nil {
		cs.fail(StatusInternalServerError) // cannot happen: it parsed before
		return false
	}
	req.Body = cs.body
	return cs.serve(req, 0)
}

// serve runs the handler for req, writes its response and consumes consume bytes of input. It reports
// whether the next request may be served.
func (cs *conn) serve(req *Request, consume int) bool {
	ls := cs.ls
	w := &ls.w
	w.reset(cs, ls.body)
	if ls.inline == cs {
		// Under serveLoop's recover: no defer here (see disarm).
		ls.inline, ls.inlineConsume = nil, consume
		w.req = req // req.pattern is "": the parser cleared it (setLine)
		if f := ls.srv.hf; f != nil {
			f(w, req)
		} else {
			ls.srv.h.ServeHTTP(w, req)
		}
		ls.inline = cs
		cs.pattern = req.pattern
		w.req = nil
	} else {
		cs.callHandler(w, req)
	}
	if b := w.resp.Body(); cap(b) > cap(ls.body) && cap(b) <= 64<<10 {
		ls.body = b[:0]
	}
	// The usual answer, the buffered response, is told by three tests;
	// the steps' bookkeeping cost 38 instructions a request (callgrind,
	// BenchmarkServerFastPath depth=16).
	if w.then.step != stepRespond || w.det != nil || w.file != nil {
		if ok, done := cs.takeStep(w, req, consume); done {
			return ok
		}
	}
	cs.writeResponse(&w.resp, req)
	cs.c.Discard(consume)
	cs.endBody()
	return cs.end(true)
}

// takeStep carries out the step the handler that ran with w for req
// left, other than sending its buffered response: done is false when
// that is still to do, else ok reports whether the next request may be
// served.
func (cs *conn) takeStep(w *ResponseWriter, req *Request, consume int) (ok, done bool) {
	cs.ls.flushPending() // every step writes, closes or hands the connection on
	next := w.then
	w.then = then{}
	det := w.takeDetached(next.step)
	switch next.step {
	case stepDetach:
		cs.c.Discard(consume)
		cs.endBody()
		cs.phase = phaseBusy
		if det.body.streamed {
			// endBody forgot the framing serveStreamed set.
			cs.chunked, cs.remaining = req.Chunked, max(req.ContentLength, 0)
			cs.phase, cs.dbody = phaseDetBody, det
			// Its answer closes the connection unless the body is read
			// to its end (detached.bodyComplete).
			det.head.close = !cs.keepAsked
			cs.startBodyClock()
		}
		return det.run(), true
	case stepOffload:
		cs.c.Discard(consume)
		cs.endBody()
		cs.phase = phaseBusy
		offload(cs, next.job)
		return false, true
	case stepFail, stepAbort:
		cs.c.Discard(consume)
		cs.endBody()
		if next.step == stepAbort {
			cs.abort(nil)
		} else {
			cs.fail(StatusInternalServerError)
		}
		return false, true
	case stepStd:
		// A FromStd handler below the root: it runs off the loop like
		// the root one, on the request copied out of the input.
		cs.startStd(next.std, req, w)
		cs.c.Discard(consume)
		cs.endBody()
		return false, true
	case stepHijack:
		cs.writeResponse(&w.resp, req)
		cs.c.Discard(consume)
		cs.endBody()
		cs.handOver(next.hijack)
		return false, true
	}
	if body := w.file; body != nil { // ServeFile served it on the loop (fs_inline.go)
		w.file = nil
		cs.c.Discard(consume)
		cs.endBody()
		cs.writeFile(&w.resp, req, body)
		return false, true
	}
	return false, false
}

// handOver gives the connection to h after a Hijack: the server forgets
// it (its list, count and timer) and h gets OnOpen, then whatever input
// followed the request.
func (cs *conn) handOver(h vnet.Handler) {
	ls := cs.ls
	ls.flushPending()
	cs.report(true)
	ls.countServed(cs.c.Loop())
	ls.st.hijacked.Add(1)
	ls.conns.remove(cs)
	cs.ls.srv.active.Add(-1)
	ls.timers.stop(cs)
	cs.phase = phaseHijacked
	c := cs.c
	c.SetValue(nil)
	c.SetHandler(h)
	cs.dropState()
	ls.recycle(cs) // nothing refers to cs any more; not to be used below
	h.OnOpen(c)
	if !c.Closed() && c.Buffered() > 0 {
		h.OnData(c)
	}
}

func (cs *conn) callHandler(w *ResponseWriter, req *Request) {
	defer cs.recoverHandler(w, req)
	req.pattern = ""
	w.req = req // for Detach; the loop's writer never streams (Flush)
	cs.ls.srv.h.ServeHTTP(w, req)
}

func (cs *conn) recoverHandler(w *ResponseWriter, req *Request) {
	cs.handlerReturned(w, req, recover())
}

// handlerReturned records what the handler that ran with w for req left,
// r being what it panicked with (nil if it returned).
func (cs *conn) handlerReturned(w *ResponseWriter, req *Request, r any) {
	// Kept for netHandler.Describe, which runs after OnData returns, when
	// the loop's Request may already hold the next request.
	cs.pattern = req.pattern
	w.req = nil
	if r != nil {
		w.then = then{step: stepAbort}
		if !cs.ls.srv.handlerPanicked(r, "remote", cs.c.RemoteAddr()) {
			w.then.step = stepFail
			cs.ls.st.panics.Add(1)
		}
	}
}

// disarm ends the batch of cs's serveLoop. When a handler serve called
// straight panicked (inline is nil then), it recovers the panic and
// finishes that request as serve does after callHandler: a 500, or
// nothing for ErrAbortHandler, and the connection closes. Any other panic
// goes on: recover is called only for a handler's. It is the loop's, not
// cs's: a hijack recycles cs before the batch ends, and cs is used only
// in a handler's panic, before anything could recycle it.
func (ls *loopState) disarm(cs *conn) {
	running := ls.inline == nil
	ls.armed, ls.inline = false, nil
	ls.flushPending()
	if !running {
		return
	}
	r := recover()
	if r == nil {
		return // runtime.Goexit in the handler: nothing to answer
	}
	// serve's request is always the loop's: serveLoop's, readBody's and
	// serveStreamed's are ls.req.
	req := &ls.req
	cs.handlerReturned(&ls.w, req, r)
	cs.takeStep(&ls.w, req, ls.inlineConsume) // stepFail or stepAbort
}

// handlerPanicked logs a handler's recovered panic r with its stack (one
// attribute per frame, so that it reads as a stack with the text and JSON
// handlers alike: see internal/panicstack) and attrs, and reports whether
// it was net/http.ErrAbortHandler instead: the handler's way to drop the
// connection, with no 500 and no log.
func (s *Server) handlerPanicked(r any, attrs ...any) (aborted bool) {
	if r == nethttp.ErrAbortHandler {
		return true
	}
	s.opts.logger.Error("http: handler panicked", append(attrs, "panic", r, "stack", panicstack.Capture())...)
	return false
}

// appendBody adds data to the body being collected. The buffer grows
// geometrically up to total (the whole body's length when known, else 0),
// and the growth is charged to the server-wide budget for buffered bodies;
// when that is spent the client gets 503 and appendBody reports false.
func (cs *conn) appendBody(data []byte, total int64) bool {
	body, ok := cs.ls.srv.growBody(cs.body, len(data), total, &cs.bodyHeld)
	if !ok {
		cs.ls.st.overBudget.Add(1)
		cs.ls.srv.opts.logger.Debug("http: buffered request bodies over budget", "remote", cs.c.RemoteAddr(), "budget", cs.ls.srv.opts.maxBufferedBody)
		cs.endBody()
		cs.fail(StatusServiceUnavailable)
		return false
	}
	cs.body = append(body, data...)
	return true
}

// growBody makes room in body for n more bytes: it grows geometrically,
// up to total (the whole body's length when known, else 0), and the growth
// is charged to the server-wide budget for buffered bodies, in *held (the
// capacity charged for this body so far). It reports false, with body
// unchanged, when the budget is spent.
func (s *Server) growBody(body []byte, n int, total int64, held *int64) ([]byte, bool) {
	need := len(body) + n
	if need <= cap(body) {
		return body, true
	}
	newCap := max(2*cap(body), need, bodyMinAlloc)
	if total > 0 {
		newCap = min(newCap, max(int(total), need))
	}
	if delta := int64(newCap) - *held; delta > 0 {
		if s.bodyBytes.Add(delta) > s.opts.maxBufferedBody {
			s.bodyBytes.Add(-delta)
			return body, false
		}
		*held += delta
	}
	nb := make([]byte, len(body), newCap)
	copy(nb, body)
	return nb, true
}

// bodyMinAlloc is the first allocation for a body that did not arrive with
// its head, and the largest body buffer a connection keeps between
// requests.
const bodyMinAlloc = 4 << 10

// waitingForBody reports whether the connection waits for the client to
// send more of a request body (and not for a FromStd handler to read it).
func (cs *conn) waitingForBody() bool {
	switch cs.phase {
	case phaseBody:
		return true
	case phaseStdBody:
		x := cs.std()
		return x != nil && !x.readPaused && (!x.expect100 || x.continued)
	case phaseDetBody:
		b := &cs.dbody.body
		return b.state == bodyReading && !b.readPaused && !b.paused
	}
	return false
}

// The body clocks. Two rules end a request whose body the client is slow
// to send, both counted only while the server waits for the client:
//   - the read-body timeout: no body byte for that long (nginx's
//     client_body_timeout);
//   - the minimum body rate (Apache's mod_reqtimeout MinRate): the body
//     is due a grace period after the clock starts, plus one second for
//     every rate bytes received, so a body trickled a byte at a time,
//     which never trips the first rule, is ended after about the grace.

// startBodyClock starts both clocks for a body the server now waits for.
func (cs *conn) startBodyClock() {
	now := cs.now()
	cs.bodyAt, cs.rateFrom, cs.rateGot = now, now, 0
	if d := cs.bodyDeadline(); d != 0 {
		cs.armAt(d)
	}
}

// restartBodyClock starts the body clocks afresh: the server was the one
// waiting (for a FromStd handler to read, or to ask for the body of an
// Expect: 100-continue request) and now waits for the client.
func (cs *conn) restartBodyClock() {
	if cs.phase == phaseStdBody || cs.phase == phaseDetBody {
		cs.startBodyClock()
		return
	}
	now := cs.now()
	cs.bodyAt, cs.rateFrom, cs.rateGot = now, now, 0
}

// bodyArrived records n body bytes received now.
func (cs *conn) bodyArrived(n int) {
	cs.rec.in += int64(n)
	if n > 0 {
		cs.bodyAt = cs.now()
		cs.rateGot += int64(n)
	}
}

// bodyDeadline is when the body clocks end the request unless more of it
// arrives (loop clock), or 0 when neither rule is on.
func (cs *conn) bodyDeadline() int64 {
	o := &cs.ls.srv.opts
	var d int64
	if o.readBodyTimeout > 0 {
		d = cs.bodyAt + int64(o.readBodyTimeout)
	}
	if r := o.minBodyRate; r > 0 {
		// got/r seconds, split so that got*1e9 cannot overflow.
		got := cs.rateGot
		earned := got/r*int64(time.Second) + got%r*int64(time.Second)/r
		if rd := cs.rateFrom + int64(o.bodyRateGrace) + earned; d == 0 || rd < d {
			d = rd
		}
	}
	return d
}

// bodyTimeout ends a request whose body stopped arriving for longer than
// the read-body timeout: a fast handler's request is answered with
// 408 Request Timeout; a FromStd handler's body read fails with
// ErrBodyReadTimeout, and the connection closes after its response.
func (cs *conn) bodyTimeout() {
	cs.ls.srv.opts.logger.Debug("http: request body timeout", "remote", cs.c.RemoteAddr())
	if cs.phase == phaseStdBody {
		x := cs.std()
		cs.phase = phaseBusy
		x.pipe.closeWrite(ErrBodyReadTimeout)
		cs.ls.timers.arm(cs, cs.now()+int64(longPoll))
		return
	}
	if cs.phase == phaseDetBody {
		cs.phase = phaseBusy
		cs.dbody.closeWrite(ErrBodyReadTimeout)
		return
	}
	cs.endBody()
	cs.fail(StatusRequestTimeout)
}

// endBody forgets the body of the request just answered.
func (cs *conn) endBody() {
	cs.sent100 = false
	cs.remaining = 0
	if cs.bodyHeld > 0 {
		cs.ls.srv.bodyBytes.Add(-cs.bodyHeld)
		cs.bodyHeld = 0
	}
	if cap(cs.body) > bodyMinAlloc {
		cs.body = nil
	} else {
		cs.body = cs.body[:0]
	}
	if cap(cs.head) > 16<<10 {
		cs.head = nil
	}
}

// writeResponse serializes resp, the answer to req, into the output.
func (cs *conn) writeResponse(resp *response, req *Request) {
	if cs.ls.srv.shutting.Load() {
		req.Close = true
	}
	body := resp.Body()
	ls := cs.ls
	// date, by hand: too big to inline, its call cost 17 instructions.
	date := ls.dates.Last()
	if cs.c.Loop().Clock() >= ls.dateUntil {
		date = cs.newDate()
	}
	cs.rec.status = resp.status // 0 is 200: see complete
	need := resp.headBound(date) + len(body)
	if ls.inline == cs && ls.batched > 0 && len(ls.pend)+need <= cap(ls.pend) {
		// Between two handlers of serveLoop's batch, after its first
		// answer: the answer joins the batch's, queued once when the batch
		// ends (flushPending). One Write per answer, with AvailableBuffer,
		// cost 220 instructions a pipelined request (callgrind,
		// BenchmarkServerFastPath depth=16). The first is queued at once,
		// built where it is queued: a batch of one is not copied again.
		start := len(ls.pend)
		buf := resp.appendHeadCached(ls.pend, req, date, int64(len(body)), ls.head200, &ls.heads)
		if resp.BodyAllowed() {
			buf = append(buf, body...)
		}
		cs.rec.out += int64(len(buf) - start)
		ls.pend, ls.pendConn = buf, cs
		cs.outClose = resp.ShouldClose()
		return
	}
	ls.flushPending()
	if ls.inline == cs {
		ls.batched++
	}
	// Built in the output queue's own free space when it surely fits, so
	// the response is not copied there afterwards.
	if buf := cs.c.AvailableBuffer(); cap(buf) >= need {
		buf = resp.appendHeadCached(buf, req, date, int64(len(body)), ls.head200, &ls.heads)
		if resp.BodyAllowed() {
			buf = append(buf, body...)
		}
		cs.write(buf)
		cs.outClose = resp.ShouldClose()
		return
	}
	ls.scratch = resp.appendHeadCached(ls.scratch[:0], req, date, int64(len(body)), ls.head200, &ls.heads)
	cs.outClose = resp.ShouldClose()
	if !resp.BodyAllowed() || len(body) == 0 {
		cs.write(ls.scratch)
		return
	}
	// One call queues both: the connection's bookkeeping runs once.
	ls.iov = [3][]byte{ls.scratch, body}
	cs.rec.out += int64(len(ls.scratch) + len(body))
	cs.c.Writev(ls.iov[:2])
	ls.iov = [3][]byte{}
}

// writeBodyPart queues data as the next part of a streamed body: framed
// as one chunk when chunked (size line, data and CRLF in one Writev, so
// they share a segment), else as it is.
func (cs *conn) writeBodyPart(data []byte, chunked bool) {
	switch {
	case len(data) == 0:
	case chunked:
		ls := cs.ls
		ls.flushPending()
		ls.scratch = h1.AppendChunkHeader(ls.scratch[:0], len(data))
		ls.iov = [3][]byte{ls.scratch, data, crlf}
		cs.rec.out += int64(len(ls.scratch) + len(data) + len(crlf))
		cs.c.Writev(ls.iov[:])
		ls.iov = [3][]byte{}
	default:
		cs.write(data)
	}
}

var crlf = []byte("\r\n") // read only: the CRLF that ends a chunk

// enterIdle waits for the next request, under the idle timeout.
func (cs *conn) enterIdle() {
	cs.phase = phaseIdle
	cs.phaseStart = cs.now()
	if it := cs.ls.srv.opts.idleTimeout; it > 0 {
		cs.armAt(cs.phaseStart + int64(it))
	}
}

// fail answers with an error status and closes the connection; once a
// streamed answer started, it only closes it.
func (cs *conn) fail(status int) {
	cs.begin() // a connection refused before its first request has none
	if cs.outStarted {
		cs.report(false)
		cs.linger()
		return
	}
	ls := cs.ls
	ls.scratch = h1.AppendError(ls.scratch[:0], status, cs.date(), DefaultServerName)
	cs.write(ls.scratch)
	cs.rec.status = status
	cs.report(true)
	cs.linger()
}

// write queues p, counted as part of the answer in progress.
func (cs *conn) write(p []byte) {
	cs.ls.flushPending()
	cs.rec.out += int64(len(p))
	cs.c.Write(p)
}

// flushPending queues the answers of serveLoop's batch on their
// connection: at the batch's end, and before anything else is written to
// the connection or it is closed or handed on, so that the output keeps
// its order. Only the loop calls it.
func (ls *loopState) flushPending() {
	cs := ls.pendConn
	if cs == nil {
		return
	}
	ls.pendConn = nil
	cs.c.Write(ls.pend)
	ls.pend = ls.pend[:0]
}

// report tells the completion hook about the request in progress, if it
// was begun (only with a hook) and not reported yet.
func (cs *conn) report(completed bool) {
	if cs.rec.pending { // only with a hook: the test stays inlined
		cs.reportNow(completed)
	}
}

// reportNow is report's call of the hook, kept out of line so that
// report's test inlines into the request path.
//
//go:noinline
func (cs *conn) reportNow(completed bool) {
	// The pattern of the handler called for this request: none other
	// runs on the connection until it ends, and begin cleared it for a
	// request no fast handler saw.
	cs.rec.route = cs.pattern
	cs.ls.srv.complete(cs.ls, &cs.rec, cs.c, completed)
}

// protoError answers a malformed request with the status of err and
// closes the connection.
//
// One line is not answered: with HTTP/2 on, a connection may open with
// HTTP/2's preface (h2c with prior knowledge), and a client that sends a
// broken one (h2spec 3.5 sends "INVALID CONNECTION PREFACE") must see a
// connection error (RFC 9113 §3.4), not an HTTP/1.1 answer it would read
// as frames. So the connection closes without an answer when all hold:
//   - HTTP/2 is on and no request was answered on the connection yet;
//   - the parser found no HTTP-version at the end of the first line
//     (errNotHTTPVersion: not "HTTP/" digit "." digit);
//   - the line, read to its end, is not an HTTP/1 request line at all:
//     its method is none of RFC 9110's (GET, HEAD, POST, PUT, DELETE,
//     CONNECT, OPTIONS, TRACE) nor PATCH, and none of its words after the
//     method starts with "HTTP/" in any letter case (isRequestLine).
//
// Every other bad line is an HTTP/1 client's and gets its status (RFC 9112
// §3), as nginx and net/http answer it: "GET /v HTTP/1.x", "GET /v
// http/1.1", "GET /v HTTP/01.1", "GET /v HTTP/4294967295.255" and "GET /a
// b HTTP/1.1" get 400 (RFC 9112 §2.3 allows one digit each side of the
// dot), "GET /v HTTP/2.0" gets 505. With HTTP/2 off every line is
// answered.
func (cs *conn) protoError(err error) {
	cs.ls.st.protoErrors.Add(1)
	status := ErrorStatus(err)
	silent := false
	if err == errNotHTTPVersion && cs.mayBePreface() {
		buf, _ := cs.c.Peek(0)
		silent = !isRequestLine(buf)
	}
	if l := cs.ls.srv.opts.logger; l.Enabled(context.Background(), slog.LevelDebug) {
		l.Debug("http: rejected request", "status", status, "reason", err.Error(), "answered", !silent, "remote", cs.c.RemoteAddr())
	}
	if silent {
		cs.linger()
		return
	}
	if cs.ls.srv.opts.completion != nil && !cs.rec.pending {
		cs.rec.begin(nil, 0, cs.now()) // rejected before its head parsed
	}
	cs.fail(status)
}

// mayBePreface reports whether the connection's input may still be a
// client's HTTP/2 preface: HTTP/2 is on and nothing was answered yet.
func (cs *conn) mayBePreface() bool { return cs.ls.srv.opts.h2c && !cs.answered }

// linger closes the connection after its output: it half-closes, then
// discards input until the peer closes too or the linger timeout passes.
// Closing with unread input would make the kernel send a reset, which can
// destroy the response before the client reads it. A second call while
// draining does nothing: its CloseWrite would fail and close at once,
// with the very reset lingering avoids (an HTTP/2 connection error with
// streams open lingered twice: once as its last stream closed, once
// after, and a client still sending lost the GOAWAY).
func (cs *conn) linger() {
	if cs.phase == phaseDraining {
		return
	}
	cs.ls.flushPending() // a close sends what was queued first
	c := cs.c
	c.Discard(-1)
	c.ResumeRead() // the peer's close must be seen
	cs.phase = phaseDraining
	if cs.eof || c.CloseWrite() != nil {
		c.Close()
		return
	}
	cs.phaseStart = cs.now()
	cs.armAt(cs.phaseStart + int64(cs.ls.srv.opts.lingerTimeout))
}

func (cs *conn) onEOF() {
	cs.eof = true
	switch cs.phase {
	case phaseH2:
		// The answers in progress still go out; then the connection
		// closes. Streams still waiting for the client end (peerClosed).
		cs.h2.peerClosed()
	case phaseBusy, phaseStdBody, phaseDetBody:
		// The response in progress still goes out; then the connection
		// closes. A FromStd request sees its context canceled, a
		// detached answer OnGone (and an unfinished body ErrBodyAborted).
		if x := cs.std(); x != nil {
			x.peerGone()
		}
		if cs.offCancel != nil {
			cs.offCancel()
		}
	default:
		cs.c.Close()
	}
}

func (cs *conn) onClose(err error) {
	if cs.reqState != nil {
		cs.report(false) // a request cut short by the close
		if cs.offCancel != nil {
			cs.offCancel()
		}
		if cs.bodyHeld > 0 {
			cs.ls.srv.bodyBytes.Add(-cs.bodyHeld)
			cs.bodyHeld = 0
		}
	}
	if x := cs.std(); x != nil {
		x.connClosed(err)
		cs.stdc.x = nil
	}
	if cs.h2 != nil {
		cs.h2.closeAll()
	}
	switch cs.phase {
	case phaseBusy, phaseStdBody:
		// An offloaded job, a detached answer, a file or a FromStd
		// handler may still reach the state from a later callback (it
		// finds the connection closed): it stays with the connection
		// and goes with it to the garbage collector, never reused.
	default:
		cs.dropState()
	}
}
