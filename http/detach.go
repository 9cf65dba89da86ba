package http

import (
	"errors"
	"net"
	"time"

	vnet "github.com/veloq/veloq/net"
)

// ErrDetachUnavailable is returned by [ResponseWriter.Detach] in a handler
// that does not run inline on the loop: an offloaded one already answers
// later, from its own goroutine.
var ErrDetachUnavailable = errors.New("http: Detach is only available to inline handlers")

// Detach lets an inline handler return before its answer is ready: the
// answer is completed later, on the same loop, through the returned
// [Responder] — typically from callbacks the loop runs (a timer, another
// connection's data: an upstream's answer arriving), with no goroutine.
// The status and fields set on w so far (by a middleware, say) are where
// the Responder's head starts, as for [Offloaded]; the body written to w
// is dropped.
//
// The exchange stays in progress until [Responder.End] or
// [Responder.Fail], or until the client goes away ([Responder.OnGone]).
// Meanwhile the requests an HTTP/1 client pipelined behind it wait, and
// are answered in order after it; Server.Shutdown waits for it as for any
// request in progress (and cuts it when its context ends). An answer
// that sends nothing (head or body part) for the server's next-request
// timeout ([WithNextRequestTimeout], 60 s by default) is ended: with 503
// Service Unavailable if nothing was sent yet, else cut so that the
// client sees it incomplete; OnGone runs. Time spent in WhenWritable
// waiting for a slow client does not count: [WithWriteTimeout] judges
// that.
//
// If the handler panics after Detach, the exchange ends as for any panic
// (500, or the answer cut once its head went out) and the Responder is
// dead. Calling Detach twice in one handler returns the same Responder.
// An offloaded handler gets [ErrDetachUnavailable].
func (w *ResponseWriter) Detach() (*Responder, error) {
	if w.det != nil {
		w.then = then{step: stepDetach}
		return w.det, nil
	}
	r := new(Responder)
	if err := w.DetachTo(r); err != nil {
		return nil, err
	}
	return r, nil
}

// DetachTo is [ResponseWriter.Detach] with the Responder in r, memory the
// caller provides, so that detaching allocates nothing: a proxy keeps one
// in each of its pooled per-request states (Detach allocates the small
// handle for each answer). r may be used for another answer once this one
// ended (End, Fail, Hijack, OnGone ran, or a method returned
// net.ErrClosed: see [Responder.OnGone]) and nothing calls its methods
// for this one any more: a Responder reused sooner would act on the new
// answer. Once the handler detached, DetachTo with another r makes r
// address the same answer.
func (w *ResponseWriter) DetachTo(r *Responder) error {
	if w.off || w.ex == nil || w.req == nil {
		return ErrDetachUnavailable
	}
	if w.det != nil {
		*r = *w.det
		w.then = then{step: stepDetach}
		return nil
	}
	ls := w.ex.shared()
	d := ls.newDetached(w.ex.transport().Loop())
	d.ex = w.ex
	d.inHandler = true
	_, d.head.method = internMethod(w.req.Method)
	d.head.major, d.head.minor = uint8(max(w.req.ProtoMajor, 1)), uint8(w.req.ProtoMinor)
	d.head.close = w.req.Close
	if w.req.bodyStreams {
		d.body.state, d.body.streamed, d.body.expect100 = bodyUnread, true, w.req.Expect100
	}
	d.activeAt = d.loop.Clock()
	d.resp.SetStatus(w.resp.status)
	h := &w.resp.header
	for i := range h.fields {
		d.resp.header.AddBytes(h.name(i), h.value(i))
	}
	*r = Responder{d: d, gen: d.gen}
	w.det = r
	w.then = then{step: stepDetach}
	return nil
}

// A Responder completes the answer of a detached request (see
// [ResponseWriter.Detach]): a head, then body parts, then the end; or a
// whole answer in one call (Respond); or an error (Fail).
//
// All its methods must be called on the loop that ran the handler
// (Loop); code on another goroutine posts to it (Loop().Post). Once the
// answer ended (End, Fail) or the client went away, every method is a
// harmless no-op: Write returns net.ErrClosed, WhenWritable calls its
// function with net.ErrClosed, Header and Trailer return a scratch header
// that is never sent. The Responder's state is kept by the loop for the
// next detached answer, so a Responder costs one small allocation (a
// handle with a generation, which is what makes a stale one harmless),
// or none with [ResponseWriter.DetachTo].
type Responder struct {
	d   *detached
	gen uint32
}

// detached is a detached answer's state, kept by its loop for reuse; gen
// counts the answers it served, so a Responder of an earlier one finds
// it changed.
type detached struct {
	ls   *loopState
	loop *vnet.Loop
	gen  uint32
	ex   exchange // the exchange answered, while live

	head      stdHead // the request as writing the head needs it
	resp      response
	trailer   ResponseHeader
	cl        int64 // announced body length, -1 if unknown
	sent      int64 // body bytes written
	activeAt  int64 // loop clock of the last head or body write
	headSent  bool
	bodyless  bool // HEAD, 1xx, 204 or 304: the head announces, no body follows
	inHandler bool // the handler that detached has not returned yet
	gaveUp    bool // a method returned net.ErrClosed: see OnGone
	// What End or Fail asked while the handler was still running: done
	// once it returns (run).
	pending  uint8
	failWith int
	hijackTo vnet.Handler // pendHijack's handler

	onGone   func()
	writable func(error) // the function WhenWritable waits to call
	wake     func(error) // d.onWritable, made once
	goneFn   func()      // d.gone, made once
	// timer cuts an answer that sends nothing for the next-request
	// timeout (onStall); made for the first answer, reset for each.
	timer *vnet.Timer

	body      bodyStream // the request body, streamed (detach_body.go)
	deliverFn func()     // d.deliver, made once
}

// Requests left for run.
const (
	pendNone uint8 = iota
	pendEnd
	pendFail
	pendHijack
)

// newDetached returns a detached state of the loop, reused if one is free.
func (ls *loopState) newDetached(l *vnet.Loop) *detached {
	if n := len(ls.detFree); n > 0 {
		d := ls.detFree[n-1]
		ls.detFree[n-1] = nil
		ls.detFree = ls.detFree[:n-1]
		return d
	}
	d := &detached{ls: ls, loop: l, cl: -1}
	d.resp.Reset(nil)
	// Method values allocate: made once, not for each answer.
	d.wake, d.goneFn, d.deliverFn = d.onWritable, d.gone, d.deliver
	return d
}

// maxFreeDetached bounds the detached states a loop keeps for reuse.
const maxFreeDetached = 256

// finish ends d's life for its answer: every Responder of it goes stale.
// keep is false when the exchange may still read d (the trailers of an
// HTTP/2 stream whose DATA waits for its windows): d is left to the
// garbage collector instead of being reused.
func (d *detached) finish(keep bool) {
	d.gen++
	d.timer.Stop()
	d.ex, d.onGone, d.writable = nil, nil, nil
	d.headSent, d.bodyless, d.inHandler, d.gaveUp = false, false, false, false
	d.pending, d.failWith, d.hijackTo = pendNone, 0, nil
	d.cl, d.sent = -1, 0
	d.body.reset()
	ls := d.ls
	if !keep || len(ls.detFree) >= maxFreeDetached {
		return
	}
	d.resp.Reset(d.resp.body)
	d.trailer.Reset()
	ls.detFree = append(ls.detFree, d)
}

// live returns the state of r's answer while it is in progress.
func (r *Responder) live() *detached {
	if d := r.d; d.gen == r.gen && d.ex != nil {
		return d
	}
	return nil
}

// closed reports whether d's connection is closing, in which case the
// method that asks returns net.ErrClosed and the answer is over for its
// user (giveUp).
func (d *detached) closed() bool {
	if !d.ex.transport().Closed() {
		return false
	}
	d.giveUp()
	return true
}

// giveUp ends the answer for its user, who was told net.ErrClosed: no
// callback of it runs later (see OnGone). d stays with its exchange
// until the connection's close reports it gone, or End or Fail, which
// release it as for any answer whose connection is closing.
func (d *detached) giveUp() {
	d.gaveUp = true
	d.onGone, d.writable = nil, nil
	if b := &d.body; b.state != bodyNone {
		b.state = bodyOver // no part, and no end (ErrBodyAborted), for OnBody
	}
}

// run takes over the exchange once the handler that detached returned:
// what it asked meanwhile is done now, else the exchange waits for the
// Responder, and the protocol reports the client's going. It reports
// whether the protocol may go on at once with the next request.
func (d *detached) run() bool {
	d.inHandler = false
	switch d.pending {
	case pendEnd:
		return d.end()
	case pendFail:
		return d.fail(d.failWith)
	case pendHijack:
		d.hijack(d.hijackTo)
		return false
	}
	d.ex.cancelOnGone(d.goneFn)
	if d.body.streamed && d.body.state == bodyReading {
		d.ex.bodyDrained() // OnBody was called in the handler: read now
	}
	if wait := d.ls.srv.opts.idleTimeout; wait > 0 {
		d.activeAt = d.loop.Clock()
		if d.timer == nil {
			d.timer = d.loop.AfterFunc(wait, d.onStall)
		} else {
			d.timer.Reset(wait)
		}
	}
	return false
}

// onStall cuts an answer that has sent nothing (head or body part) for
// the next-request timeout, as nginx's proxy_read_timeout cuts an
// upstream that stopped answering: without it a Responder that is
// forgotten would hold its connection, and Shutdown, for good. Nothing
// sent yet, the client gets 503 (as from net/http's TimeoutHandler) and
// its connection goes on; otherwise the answer is cut. OnGone runs, so
// that the answer's producer stops too. An answer waiting in
// WhenWritable waits for the client, not for its producer: that is the
// write timeout's to judge.
func (d *detached) onStall() {
	if d.ex == nil {
		return
	}
	wait := d.ls.srv.opts.idleTimeout
	if d.writable != nil || d.body.state == bodyReading && !d.body.ended {
		// Waiting for the client, or reading its body: the write and
		// read-body timeouts judge that.
		d.activeAt = d.loop.Clock()
	}
	if left := d.activeAt + int64(wait) - d.loop.Clock(); left > 0 {
		d.timer.Reset(time.Duration(left))
		return
	}
	d.ls.st.timeouts.Add(1)
	d.ls.srv.opts.logger.Debug("http: detached answer timed out", "remote", d.ex.transport().RemoteAddr())
	if d.bodyGone(); d.ex == nil {
		return // the reader ended the answer
	}
	ex, f, w := d.ex, d.onGone, d.writable
	if d.fail(StatusServiceUnavailable) {
		ex.resume()
	}
	if w != nil {
		w(net.ErrClosed)
	}
	if f != nil {
		f()
	}
}

// gone runs when the protocol reports that the client went away (closed,
// half-closed, reset the stream) or the connection closed.
func (d *detached) gone() {
	if d.bodyGone(); d.ex == nil {
		return // the reader ended the answer
	}
	ex, f, w := d.ex, d.onGone, d.writable
	ex.cancelOnGone(nil)
	d.finish(true)
	if !ex.transport().Closed() {
		// A half-close (HTTP/1) or a client FIN under HTTP/2: nothing
		// more of the answer is wanted.
		ex.abort(nil)
	}
	if w != nil {
		w(net.ErrClosed)
	}
	if f != nil {
		f()
	}
}

// Loop returns the loop every method of r must run on.
func (r *Responder) Loop() *vnet.Loop { return r.d.loop }

// Header returns the fields of the answer's head, to fill before
// WriteHead. Framing fields (Content-Length, Transfer-Encoding) are
// ignored; "Connection: close" closes the connection after the answer.
// After WriteHead it returns a scratch header that is never sent.
func (r *Responder) Header() *ResponseHeader {
	d := r.live()
	if d == nil || d.headSent {
		return r.d.ls.scratchHeader()
	}
	return d.resp.Header()
}

// scratchHeader is a header that is never sent, for a Responder whose
// head went out or whose answer ended.
func (ls *loopState) scratchHeader() *ResponseHeader {
	ls.detScratch.Reset()
	return &ls.detScratch
}

// WriteHead sends the head of the answer with status and r's Header.
// contentLength >= 0 announces that many body bytes; a negative one an
// unknown number: the body is chunked on HTTP/1.1, delimited by closing
// the connection on HTTP/1.0, DATA frames until End on HTTP/2. A HEAD
// request, a 204 or a 304 answer gets no body, whatever is written. Only
// the first call counts.
func (r *Responder) WriteHead(status int, contentLength int64) {
	d := r.live()
	if d == nil || d.headSent {
		return
	}
	d.writeHead(status, contentLength)
}

func (d *detached) writeHead(status int, cl int64) {
	d.resp.SetStatus(status)
	d.headSent = true
	d.cl = max(cl, -1)
	d.activeAt = d.loop.Clock()
	req := d.head.request(d.ls)
	d.bodyless = req.IsHead() || status < 200 || status == StatusNoContent || status == StatusNotModified
	d.ex.writeHead(&d.resp, req, d.cl)
}

// ErrBodyTooLong is returned by [Responder.Write] for the bytes past the
// length WriteHead announced, which are not sent.
var ErrBodyTooLong = errors.New("http: body longer than announced")

// Write sends p as the next part of the body; the bytes are copied, so p
// may be reused at once. Without WriteHead first, the head is sent with
// the status set so far (200 unless a middleware set one on the
// ResponseWriter) and an unknown length. Bytes past the length WriteHead
// announced are not sent: Write returns [ErrBodyTooLong]. Write does not wait for the client:
// pace a large body with Buffered and WhenWritable. It returns
// net.ErrClosed once the answer ended or the client went away, which
// ends the answer for the caller: OnGone does not run after it.
func (r *Responder) Write(p []byte) (int, error) {
	d := r.live()
	if d == nil || d.closed() {
		return 0, net.ErrClosed
	}
	if !d.headSent {
		d.writeHead(d.resp.Status(), -1)
	}
	n := len(p)
	if d.bodyless {
		return n, nil // the answer has no body: nothing goes out
	}
	var err error
	if d.cl >= 0 && d.sent+int64(n) > d.cl {
		n = int(d.cl - d.sent)
		err = ErrBodyTooLong
	}
	d.sent += int64(n)
	d.activeAt = d.loop.Clock()
	d.ex.writeBody(p[:n])
	return n, err
}

// WriteFrom sends the next n bytes of src's input as the next part of
// the body and consumes them, as Write of those bytes followed by
// src.Discard(n), except that over HTTP/1 a body sent as it is (its
// length announced by WriteHead) takes them with src.ForwardTo: on
// io_uring, a part that ends the receive buffer it arrived in is sent
// from that buffer, without a copy. src must be a connection of r's
// loop, and WriteFrom called in its callback (a proxy's upstream, in
// OnData), with at least n bytes buffered. The bytes are consumed
// whatever the outcome; the result is Write's.
func (r *Responder) WriteFrom(src *vnet.Conn, n int) (int, error) {
	d := r.live()
	if d == nil || d.closed() {
		src.Discard(n)
		return 0, net.ErrClosed
	}
	n = min(n, src.Buffered())
	if !d.headSent {
		d.writeHead(d.resp.Status(), -1)
	}
	if d.bodyless {
		src.Discard(n)
		return n, nil
	}
	var err error
	m := n
	if d.cl >= 0 && d.sent+int64(m) > d.cl {
		m = int(d.cl - d.sent)
		err = ErrBodyTooLong
	}
	d.sent += int64(m)
	d.activeAt = d.loop.Clock()
	d.ex.forwardBody(src, m)
	src.Discard(n - m)
	return m, err
}

// Buffered returns the number of bytes of the answer written so far that
// the client has not taken yet (still queued in the server): with
// WhenWritable, what paces a large body.
func (r *Responder) Buffered() int {
	d := r.live()
	if d == nil {
		return 0
	}
	return d.ex.buffered()
}

// WhenWritable calls f on the loop once the client has taken the answer
// down to the server's low-water mark (256 KiB queued), with nil, or with
// net.ErrClosed once the answer is gone. One function waits at a time:
// a second call replaces the first. The call may come early (a wake-up
// an earlier answer asked for): check Buffered before writing much.
func (r *Responder) WhenWritable(f func(error)) {
	d := r.live()
	if d == nil || d.gaveUp {
		f(net.ErrClosed)
		return
	}
	wait := d.writable == nil
	d.writable = f
	if wait {
		d.ex.whenWritable(d.wake)
	}
}

// onWritable is the exchange's whenWritable callback for d. It may be
// one an earlier answer of d asked for (d is reused, and an exchange
// cannot take a wait back): its error says that answer's connection or
// stream is gone, not this one's, so an error counts only when this
// answer's connection closed; a stream reset reaches f through gone.
func (d *detached) onWritable(err error) {
	f := d.writable
	if f == nil {
		return // the answer ended meanwhile
	}
	if err != nil && !d.ex.transport().Closed() {
		err = nil
	}
	d.writable = nil
	f(err)
}

// Trailer returns the trailer fields sent at End: in the last chunk of a
// chunked HTTP/1.1 body, in a HEADERS frame on HTTP/2; they are dropped
// when the body is not chunked.
func (r *Responder) Trailer() *ResponseHeader {
	d := r.live()
	if d == nil {
		return r.d.ls.scratchHeader()
	}
	return &d.trailer
}

// End completes the answer; the connection goes on with the next
// request. A head not sent yet is sent now (status 200 and an empty body
// unless set). A body shorter than the length announced closes the
// connection after it, since the client cannot frame the next answer.
func (r *Responder) End() {
	d := r.live()
	if d == nil {
		return
	}
	if d.inHandler {
		d.pending = pendEnd
		return
	}
	if ex := d.ex; d.end() {
		ex.resume()
	}
}

// end ends the answer and reports whether the protocol may go on with the
// next request at once.
func (d *detached) end() bool {
	ex := d.ex
	if !d.headSent {
		d.writeHead(d.resp.Status(), 0)
	}
	trailers := d.trailer.Len() > 0
	if trailers {
		ex.writeTrailers(&d.trailer)
	}
	// A bodyless answer announced its length without sending it.
	// So must the request's body have been read to its end.
	reusable := (d.bodyless || d.cl < 0 || d.sent == d.cl) && d.bodyComplete()
	ex.cancelOnGone(nil)
	d.writable = nil // ending may report the stream closed: not to f
	more := ex.end(reusable)
	// HTTP/2 may send the trailers later, after DATA the windows hold.
	d.finish(!trailers)
	return more
}

// Respond sends a whole answer in one call: WriteHead with len(body),
// Write(body), End.
func (r *Responder) Respond(status int, body []byte) {
	r.WriteHead(status, int64(len(body)))
	_, _ = r.Write(body)
	r.End()
}

// Fail ends the answer with an error: when nothing was sent yet, an
// answer with status and its text (the connection goes on); otherwise the
// answer is cut so that the client sees it incomplete (the HTTP/1
// connection closes, the HTTP/2 stream is reset).
func (r *Responder) Fail(status int) {
	d := r.live()
	if d == nil {
		return
	}
	if d.inHandler {
		d.pending, d.failWith = pendFail, status
		return
	}
	if ex := d.ex; d.fail(status) {
		ex.resume()
	}
}

// fail ends the answer with an error and reports whether the protocol may
// go on with the next request at once.
func (d *detached) fail(status int) bool {
	ex := d.ex
	ex.cancelOnGone(nil)
	d.writable = nil
	if d.headSent {
		d.finish(true)
		ex.abort(nil)
		return false
	}
	resp := &d.resp
	resp.Reset(resp.body)
	resp.SetStatus(status)
	resp.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = resp.WriteString(StatusText(status) + "\n")
	ex.writeResponse(resp, d.head.request(d.ls))
	more := ex.end(d.bodyComplete())
	d.finish(true)
	return more
}

// Hijack ends the answer by taking the connection away from the HTTP
// server, as [ResponseWriter.Hijack] does from inside a handler: the head
// written so far is sent (typically WriteHead(StatusSwitchingProtocols,
// -1); without WriteHead, a head with the status set so far and an empty
// body), then h receives the connection as a TCP handler would: h.OnOpen
// at once, then h.OnData if the client sent bytes after the request. It
// is what a reverse proxy needs for an Upgrade (WebSocket): the
// upstream's 101 arrives after the handler returned.
//
// It returns [ErrHijackUnavailable] on HTTP/2 (a stream is not a
// connection; the answer goes on, for End or Fail) and net.ErrClosed
// once the answer ended or the client went away. Called before the
// handler that detached returned, the hand-over happens when it returns.
func (r *Responder) Hijack(h vnet.Handler) error {
	if h == nil {
		return errors.New("http: Hijack with a nil handler")
	}
	d := r.live()
	if d == nil || d.closed() {
		return net.ErrClosed
	}
	if !d.ex.canHijack() {
		return ErrHijackUnavailable
	}
	if d.inHandler {
		d.pending, d.hijackTo = pendHijack, h
		return nil
	}
	d.hijack(h)
	return nil
}

// hijack sends the head and hands the exchange's connection to h.
func (d *detached) hijack(h vnet.Handler) {
	ex := d.ex
	if !d.headSent {
		d.writeHead(d.resp.Status(), 0)
	}
	ex.cancelOnGone(nil)
	w := d.writable
	d.writable = nil
	d.finish(true)
	c := ex.transport()
	ex.handOver(h)
	// The bytes the client sent after the request waited in the
	// connection's input (phaseBusy); outside the connection's own
	// callback handOver cannot see them, so they are presented to h from
	// a deferred task. Its reading is h's from now on.
	c.ResumeRead()
	c.Redeliver()
	if w != nil {
		w(net.ErrClosed) // that answer is over
	}
}

// OnGone makes f run on the loop if the client goes away (closes the
// connection, half-closes it, resets the HTTP/2 stream) or the server
// cuts the connection (a timeout, Shutdown's deadline) before the answer
// ended: the place to stop producing it. A second call replaces f; nil
// forgets it.
//
// The answer ends for its user once, at the first of: End, Fail,
// Hijack, f's run, the stall timeout, or a call that returns
// net.ErrClosed (Write, WriteFrom, Hijack: the connection is closing,
// its close not reported yet). From then on none of its callbacks runs:
// not f, not a function waiting in WhenWritable (a later WhenWritable
// calls its function at once with net.ErrClosed), not OnBody's, though
// the connection's close may be still to come. What they refer to may
// serve another answer by then: a proxy's pooled exchange, whose late f
// canceled another client's request. After a net.ErrClosed, End or Fail
// may still be called, and release the answer's state sooner.
func (r *Responder) OnGone(f func()) {
	if d := r.live(); d != nil && !d.gaveUp {
		d.onGone = f
	}
}

// takeDetached returns the detached answer the handler that ran with w
// left, nil if none; a detached state the handler left for another step
// (a panic, a later Offloaded or Hijack) is released, its Responder dead.
func (w *ResponseWriter) takeDetached(next step) *detached {
	r := w.det
	if r == nil {
		return nil
	}
	w.det = nil
	d := r.d
	if next != stepDetach {
		d.finish(true)
		return nil
	}
	return d
}
