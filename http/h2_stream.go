package http

import (
	"errors"
	"io"
	"net"

	"github.com/veloq/veloq/http/internal/h2"
	vnet "github.com/veloq/veloq/net"
)

// An h2Stream is one request and its answer on an HTTP/2 connection, and
// the exchange its handler answers through.
//
// Its states (RFC 9113 §5.1), from the server's side: it opens with the
// client's HEADERS (open, or half-closed (remote) with END_STREAM);
// remoteDone is set by the client's END_STREAM; localDone once our
// END_STREAM is sent, after all the DATA the windows held back. With both,
// or a RST_STREAM either way, it is closed: it leaves the connection's
// map, and everything a handler off the loop still sends is dropped.
type h2Stream struct {
	hc *h2Conn
	id uint32

	remoteDone bool
	localDone  bool
	closed     bool

	sendWin h2.Window
	recvWin h2.Window

	req      Request
	arena    []byte
	declared int64  // content-length, -1 if none
	got      int64  // body bytes received
	body     []byte // the body collected for a fast handler
	bodyHeld int64  // body capacity charged to the server's budget
	padding  int    // padding received, given back with the body
	unacked  int    // body bytes taken, not yet given back to recvWin
	started  bool   // a handler has the request
	drainTo  int64  // answered: body bytes taken and dropped up to this

	// The answer.
	headSent  bool
	bodyOK    bool            // the answer may carry a body
	pending   []byte          // DATA waiting for the windows
	endQueued bool            // END_STREAM follows pending
	trailers  *ResponseHeader // sent as HEADERS with END_STREAM, after pending
	inBlocked bool            // in hc.blocked
	writable  func(error)
	cancel    func()
	stdx      *stdExchange
	// streams is set when the body streams to a StreamBody handler,
	// which runs on the head; dbody is then its detached answer, once
	// it detached (reader).
	streams bool
	dbody   *detached
	maxBody int64 // the streamed body's limit (StreamBody's)

	rec exchangeRecord // for the completion hook (completion.go)
}

var _ exchange = (*h2Stream)(nil)

func (hc *h2Conn) newStream(id uint32) *h2Stream {
	return &h2Stream{hc: hc, id: id, declared: -1,
		sendWin: h2.Window(hc.peer.InitialWindowSize), recvWin: h2.Window(h2.DefaultSettings.InitialWindowSize)}
}

// start gives the request to its handler: a FromStd root handler at once,
// its body streaming to it; a fast handler once the body is complete.
func (st *h2Stream) start() {
	if sh := st.hc.srv.std; sh != nil {
		st.startStd(sh, &st.req, nil)
		return
	}
	if r := st.hc.srv.streamRoot; r != nil && !st.remoteDone {
		if limit, ok := r.streamLimit(&st.req); ok {
			st.streams, st.maxBody = true, limit
			st.serve()
			return
		}
	}
	if st.remoteDone {
		st.serve()
	}
}

// serve runs the fast handler on the loop, as conn.serve does for HTTP/1;
// later, when the connection holds too many answers for the client.
func (st *h2Stream) serve() {
	st.started = true
	hc := st.hc
	if hc.pendingOut > h2MaxPending && !st.streams {
		hc.ready = append(hc.ready, st)
		return
	}
	ls := hc.ls
	req := &st.req
	req.Body = st.body
	if len(st.body) == 0 {
		req.Body = nil
	}
	req.bodyStreams = st.streams
	w := &ls.w
	w.reset(st, ls.body)
	hc.cs.callHandler(w, req)
	st.rec.route = hc.cs.pattern // the stream's own, for the completion hook
	if b := w.resp.Body(); cap(b) > cap(ls.body) && cap(b) <= 64<<10 {
		ls.body = b[:0]
	}
	next := w.then
	w.then = then{}
	det := w.takeDetached(next.step)
	switch next.step {
	case stepDetach:
		if det.body.streamed {
			st.dbody = det
		}
		det.run()
	case stepOffload:
		offload(st, next.job)
	case stepFail:
		st.fail(StatusInternalServerError)
	case stepAbort:
		st.abort(nil)
	case stepStd:
		st.startStd(next.std, req, w)
	default: // stepRespond; stepHijack cannot happen (canHijack)
		if body := w.file; body != nil {
			w.file = nil
			st.writeFile(&w.resp, req, body)
			return
		}
		st.writeResponse(&w.resp, req)
		st.end(true)
	}
}

// startStd runs a FromStd handler; with w, one a fast chain called. The
// handler starts after the loop's current batch of events (runStd). Its
// net/http request is made then too, for a root handler whose request
// has no body (req is st.req, kept by the stream); otherwise now: the
// body streams to it meanwhile, or the chain's w is the loop's, reused
// for the next request.
func (st *h2Stream) startStd(sh *stdHandler, req *Request, w *ResponseWriter) {
	st.started = true
	hc := st.hc
	if hc.stdLive >= h2MaxStdLive {
		st.refuseStd(w != nil) // without making a request only to drop it
		return
	}
	if w == nil && st.remoteDone {
		hc.ls.h2.startStdLater(st, nil)
		return
	}
	x, err := newStdExchange(st, hc.cs.stdState(), sh, req, w)
	if err != nil {
		hc.ls.st.protoErrors.Add(1)
		st.respondError(StatusBadRequest)
		return
	}
	st.stdx = x
	if w == nil {
		if st.remoteDone {
			x.bodyDone = true
		} else {
			x.streamBody(req.Expect100)
		}
	}
	hc.ls.h2.startStdLater(st, x)
}

// runStd starts the handler of x, st's FromStd exchange, which startStd
// deferred (with x nil, the root handler's on a request made now):
// unless the stream was closed meanwhile (reset in the same input,
// typically), or the connection has h2MaxStdLive handlers running. An
// exchange whose handler does not start is released as a handler's end
// would release it.
func (st *h2Stream) runStd(x *stdExchange) {
	hc := st.hc
	if x == nil {
		if st.closed || hc.cs.c.Closed() {
			return
		}
		if hc.stdLive >= h2MaxStdLive {
			st.refuseStd(false)
			return
		}
		var err error
		if x, err = newStdExchange(st, hc.cs.stdState(), hc.srv.std, &st.req, nil); err != nil {
			hc.ls.st.protoErrors.Add(1)
			st.respondError(StatusBadRequest)
			return
		}
		x.bodyDone = true
		st.stdx = x
	}
	sc := hc.cs.stdState()
	switch {
	case !x.current():
		x.release(sc)
	case hc.stdLive >= h2MaxStdLive:
		x.release(sc)
		st.refuseStd(x.chained)
	case x.start():
		hc.stdLive++ // until stdReturned
	default: // the pool refused it, and x.start answered 503
		x.release(sc)
	}
}

// refuseStd refuses a stream while the connection has h2MaxStdLive
// FromStd handlers running: REFUSED_STREAM, which a client may retry,
// when no handler saw it; 503 after a fast chain did.
func (st *h2Stream) refuseStd(chained bool) {
	hc := st.hc
	hc.ls.st.h2refused.Add(1)
	if chained {
		st.respondError(StatusServiceUnavailable)
		return
	}
	hc.closeStream(st, h2.RefusedStream, true)
}

// bodyData takes DATA bytes for the request body.
func (st *h2Stream) bodyData(data []byte) error {
	st.got += int64(len(data))
	if st.declared >= 0 && st.got > st.declared {
		return errMalformed(st.id, "body longer than content-length")
	}
	if d := st.reader(); d != nil {
		if st.got > st.maxBody {
			d.closeWrite(errBodyTooLarge) // its window stays spent
			return nil
		}
		full := len(data) > 0 && d.write(data)
		st.unacked += len(data) + st.padding
		st.padding = 0
		if full {
			d.body.readPaused = true // the window is given back as it reads
			return nil
		}
		st.giveBack()
		return nil
	}
	if x := st.stdx; x != nil {
		full := len(data) > 0 && x.pipe.write(data)
		st.unacked += len(data) + st.padding
		st.padding = 0
		if full {
			x.readPaused = true // the window is given back when the handler drains
			return nil
		}
		st.giveBack()
		return nil
	}
	if st.started {
		// The handler answered before the body ended: drop it, and give
		// its window back so that the client can end the stream.
		if st.drainTo > 0 && st.got > st.drainTo {
			st.hc.closeStream(st, h2.NoError, true)
			return nil
		}
		st.unacked += len(data) + st.padding
		st.padding = 0
		st.giveBack()
		return nil
	}
	limit := st.hc.srv.limits.MaxBodyBytes
	if limit > 0 && int64(len(st.body)+len(data)) > limit {
		st.respondError(StatusRequestEntityTooLarge)
		return nil
	}
	if !st.grow(len(data)) {
		return nil
	}
	st.body = append(st.body, data...)
	st.unacked += len(data) + st.padding
	st.padding = 0
	st.giveBack()
	return nil
}

// grow makes room for n more body bytes, charged to the server's budget
// for buffered bodies as HTTP/1 bodies are (503 when it is spent).
func (st *h2Stream) grow(n int) bool {
	body, ok := st.hc.srv.growBody(st.body, n, max(st.declared, 0), &st.bodyHeld)
	if !ok {
		st.hc.ls.st.overBudget.Add(1)
		st.respondError(StatusServiceUnavailable)
		return false
	}
	st.body = body
	return true
}

// giveBack returns the body bytes taken to the stream's window, once they
// are a quarter of it (or the stream's body is over, when nothing is
// given back at all).
func (st *h2Stream) giveBack() {
	if st.remoteDone || st.closed || st.unacked < 65535/4 {
		return
	}
	hc := st.hc
	st.recvWin += h2.Window(st.unacked)
	hc.ls.scratch = h2.AppendWindowUpdate(hc.ls.scratch[:0], st.id, uint32(st.unacked))
	hc.cs.c.Write(hc.ls.scratch)
	st.unacked = 0
}

// bodyEnded: the client's END_STREAM.
func (st *h2Stream) bodyEnded() error {
	st.remoteDone = true
	if st.declared >= 0 && st.got != st.declared {
		return errMalformed(st.id, "body shorter than content-length")
	}
	if x := st.stdx; x != nil {
		x.bodyDone = true
		x.pipe.closeWrite(io.EOF)
	} else if d := st.reader(); d != nil {
		d.closeWrite(io.EOF)
	} else if !st.started {
		st.serve()
	}
	st.maybeClosed()
	return nil
}

// peerClosed: the client's FIN came before its END_STREAM, so the body
// can never end. A FromStd handler sees its body read fail and its
// context canceled, as over HTTP/1 (stdExchange.peerGone), and its answer
// still goes out; a request no handler has yet is reset (CANCEL); an
// answer given before the body ended completes. An offloaded handler's
// context is canceled too, and a detached answer is gone, as over HTTP/1
// (conn.onEOF). Nothing more comes from the client, so the stream counts
// as ended on its side: it closes with its answer.
func (st *h2Stream) peerClosed() {
	if x := st.stdx; x != nil {
		x.peerGone()
		x.bodyDone = true
	} else if !st.started {
		st.hc.closeStream(st, h2.Cancel, true)
		return
	} else if cancel := st.cancel; cancel != nil {
		cancel()
	}
	st.remoteDone = true
	st.maybeClosed()
}

// respondError answers with an error status before any handler ran.
func (st *h2Stream) respondError(status int) {
	st.started = true
	var resp response
	resp.Reset(nil)
	resp.SetStatus(status)
	resp.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = resp.WriteString(StatusText(status) + "\n")
	st.writeResponse(&resp, &st.req)
	st.end(false)
}

// The exchange.

func (st *h2Stream) transport() *vnet.Conn { return st.hc.cs.c }

func (st *h2Stream) shared() *loopState { return st.hc.ls }

// writeHeaders sends the head of the answer: HEADERS and CONTINUATION
// frames, which nothing may split, so they go out whole whatever the
// windows (RFC 9113 §6.10; HEADERS is not flow controlled).
func (st *h2Stream) writeHeaders(resp *response, req *Request, cl int64, endStream bool) {
	hc := st.hc
	status := resp.Status()
	if status < 100 || status > 999 {
		status = StatusInternalServerError
	}
	noBody := status == StatusNoContent || status == StatusNotModified || req.IsHead()
	st.bodyOK = !noBody
	if noBody && !req.IsHead() {
		cl = -1
	}
	block := hc.encodeHead(resp, status, cl)
	end := endStream || noBody
	hc.ls.scratch = h2.AppendHeaders(hc.ls.scratch[:0], st.id, end, block, hc.peer.MaxFrameSize)
	hc.cs.c.Write(hc.ls.scratch)
	st.rec.status = status
	st.rec.out += int64(len(hc.ls.scratch))
	st.headSent = true
	if end {
		st.endQueued = true
		st.localDone = true
	}
}

func (st *h2Stream) writeResponse(resp *response, req *Request) {
	if st.closed || st.headSent {
		return
	}
	body := resp.Body()
	st.writeHeaders(resp, req, int64(len(body)), len(body) == 0)
	if st.localDone {
		return
	}
	st.endQueued = true
	st.send(body)
}

func (st *h2Stream) writeHead(resp *response, req *Request, cl int64) {
	if st.closed || st.headSent {
		return
	}
	st.writeHeaders(resp, req, cl, false)
}

// forwardBody copies: DATA frames are framed around the bytes, and what
// the windows hold back waits in pending.
func (st *h2Stream) forwardBody(src *vnet.Conn, n int) {
	p, _ := src.Peek(n)
	st.writeBody(p)
	src.Discard(n)
}

func (st *h2Stream) writeBody(p []byte) {
	if st.closed || !st.bodyOK || st.localDone || len(p) == 0 {
		return
	}
	st.send(p)
}

// send sends p as DATA: what the windows allow at once, straight from p
// (the usual case: nothing waits before it), and the rest copied into
// pending for flush to send as the windows open.
func (st *h2Stream) send(p []byte) {
	if len(st.pending) == 0 {
		p = st.emit(p, st.endQueued && st.trailers == nil)
	}
	st.pending = append(st.pending, p...)
	st.hc.pendingOut += len(p)
	st.flush()
}

// emit writes as much of data as the windows allow as DATA frames of at
// most the client's SETTINGS_MAX_FRAME_SIZE, the last with END_STREAM when
// end is set and all of data went, and returns the rest. Each frame's
// header and data leave in one Writev, with no copy into a frame buffer.
func (st *h2Stream) emit(data []byte, end bool) []byte {
	hc := st.hc
	ls := hc.ls
	for len(data) > 0 {
		n := min(len(data), st.sendWin.Avail(), hc.sendWin.Avail(), int(hc.peer.MaxFrameSize))
		if n == 0 {
			if hc.sendWin.Avail() == 0 && !st.inBlocked {
				st.inBlocked = true
				hc.blocked = append(hc.blocked, st)
			}
			return data
		}
		last := end && n == len(data)
		var f h2.Flags
		if last {
			f = h2.FlagEndStream
		}
		ls.scratch = h2.AppendHeader(ls.scratch[:0], h2.Header{Length: uint32(n), Type: h2.TypeData, Flags: f, Stream: st.id})
		ls.iov = [3][]byte{ls.scratch, data[:n]}
		hc.cs.c.Writev(ls.iov[:2])
		ls.iov = [3][]byte{}
		st.rec.out += int64(h2.HeaderLen + n)
		st.sendWin -= h2.Window(n)
		hc.sendWin -= h2.Window(n)
		data = data[n:]
		if last {
			st.localDone = true
		}
	}
	return nil
}

// flush sends the DATA that waited for the windows, then END_STREAM (or
// the trailers) once all is out.
func (st *h2Stream) flush() {
	if st.closed {
		return
	}
	hc := st.hc
	if len(st.pending) > 0 {
		rest := st.emit(st.pending, st.endQueued && st.trailers == nil)
		hc.pendingOut -= len(st.pending) - len(rest)
		if len(rest) > 0 {
			st.pending = rest
			if hc.cs.eof {
				// The client's FIN: no WINDOW_UPDATE can come to
				// send the rest, and the stream would hold the
				// connection open for good.
				hc.closeStream(st, h2.Cancel, true)
			}
			return
		}
		st.pending = nil
	}
	if st.endQueued && !st.localDone {
		if t := st.trailers; t != nil {
			// Encoded now, as it is sent, with the loop's encoder
			// (which keeps no table: h2_shared.go).
			hc.ls.scratch = h2.AppendHeaders(hc.ls.scratch[:0], st.id, true, hc.encodeTrailers(t), hc.peer.MaxFrameSize)
			st.trailers = nil
		} else {
			hc.ls.scratch = h2.AppendData(hc.ls.scratch[:0], st.id, true, nil)
		}
		hc.cs.c.Write(hc.ls.scratch)
		st.rec.out += int64(len(hc.ls.scratch))
		st.localDone = true
	}
	if f := st.writable; f != nil && !st.closed {
		st.writable = nil
		whenDrained(hc.cs.c, f)
	}
	st.maybeClosed()
}

// whenWritable calls f once the stream's DATA has left for the client's
// windows and the connection's output is below the mark.
func (st *h2Stream) whenWritable(f func(error)) {
	if st.closed {
		f(net.ErrClosed)
		return
	}
	if len(st.pending) > 0 {
		st.writable = f
		return
	}
	whenDrained(st.hc.cs.c, f)
}

// buffered is the stream's DATA waiting for the windows and the
// connection's output (which other streams share).
func (st *h2Stream) buffered() int {
	if st.closed {
		return 0
	}
	return len(st.pending) + st.hc.cs.c.OutputBuffered()
}

// end ends the answer: END_STREAM once its DATA is out. A request body
// the handler did not wait for is refused with RST_STREAM NO_ERROR after
// the answer (RFC 9113 §8.1). HTTP/2 has no next request to go on with.
func (st *h2Stream) end(reusable bool) bool {
	if st.closed {
		if st.localDone {
			// The whole answer went out, and that closed the stream
			// (the client had ended its side): it counts as served.
			st.hc.ls.countServed(st.hc.cs.c.Loop())
		}
		return false
	}
	st.hc.ls.countServed(st.hc.cs.c.Loop())
	if !st.headSent {
		st.fail(StatusInternalServerError)
		return false
	}
	if st.streams && !st.remoteDone {
		// A streamed body's reader is gone with the answer: the window
		// its unread bytes held goes back, so that the client can end
		// the stream (the rest is dropped, as for a fast handler).
		st.giveBack()
	}
	st.endQueued = true
	st.flush()
	st.maybeClosed()
	return false
}

// maybeClosed closes the stream once both sides ended it, or once the
// answer is out when the request body will not be read.
func (st *h2Stream) maybeClosed() {
	if st.closed || !st.localDone {
		return
	}
	// The answer ended: its exchange did, whatever becomes of the
	// request body the client may still send.
	st.report(true)
	if st.remoteDone {
		st.hc.closeStream(st, 0, false)
		return
	}
	if !st.started || st.stdx != nil || st.cancel != nil {
		return
	}
	// The answer is out and no handler will read the rest of the body.
	// Up to a window more of it is taken and dropped, so that a client
	// sending it ends the stream itself (and a body that breaks its
	// content-length is still refused); past that, it is asked to stop
	// (RST_STREAM NO_ERROR, RFC 9113 §8.1, in bodyData).
	if st.drainTo == 0 {
		st.drainTo = st.got + int64(h2.DefaultSettings.InitialWindowSize)
	}
}

func (st *h2Stream) resume() {}

// writeFile copies the file into DATA frames: they carry frame headers, so
// the socket cannot take the file's pages as they are.
func (st *h2Stream) writeFile(resp *response, req *Request, body *fileBody) {
	copyFile(st, resp, req, body)
}

func (st *h2Stream) writeTrailers(t *ResponseHeader) {
	if !st.closed && st.bodyOK && !st.localDone && t.Len() > 0 {
		st.trailers = t
	}
}

// fail answers with status unless the head went out; then the stream is
// reset, since the answer cannot complete.
func (st *h2Stream) fail(status int) {
	if st.closed {
		return
	}
	if st.headSent {
		st.hc.closeStream(st, h2.InternalError, true)
		return
	}
	st.respondError(status)
}

func (st *h2Stream) abort(err error) {
	if st.closed {
		return
	}
	code := h2.Cancel
	if err != nil {
		code = h2.InternalError
	}
	st.hc.closeStream(st, code, true)
}

func (st *h2Stream) cancelOnGone(cancel func()) {
	st.cancel = cancel
	if cancel == nil {
		st.maybeClosed()
	}
}

func (st *h2Stream) std() *stdExchange { return st.stdx }

func (st *h2Stream) setStd(x *stdExchange) {
	if old := st.stdx; x == nil && old != nil && old.readPaused {
		// The exchange leaves with its pipe's unread bytes, and the
		// stream window they held must come back, or a client whose
		// window the pipe filled stalls (neither WINDOW_UPDATE nor
		// RST_STREAM: the answer's end waits for body bytes that cannot
		// come). bodyDrained would have done it, but the resumeRead that
		// pipe.Close posts finds the exchange already gone.
		old.readPaused = false
		st.giveBack()
	}
	st.stdx = x
	if x == nil {
		st.maybeClosed()
	}
}

func (st *h2Stream) stdState() *stdConn { return st.hc.cs.stdState() }

func (st *h2Stream) stdReturned() { st.hc.stdLive-- }

// askBody sends 100 Continue as an informational HEADERS.
func (st *h2Stream) askBody(send100 bool) {
	if !send100 || st.closed || st.headSent {
		return
	}
	hc := st.hc
	block := hc.encodeHead(&response{status: StatusContinue}, StatusContinue, -1)
	hc.ls.scratch = h2.AppendHeaders(hc.ls.scratch[:0], st.id, false, block, hc.peer.MaxFrameSize)
	hc.cs.c.Write(hc.ls.scratch)
	st.rec.out += int64(len(hc.ls.scratch))
}

// reader is the detached answer st's body streams to, while it is live.
func (st *h2Stream) reader() *detached {
	if d := st.dbody; d != nil && d.ex == exchange(st) {
		return d
	}
	return nil
}

// bodyDrained gives the window back that a full pipe held; a detached
// reader gets what waited for it first (deliver calls back here).
func (st *h2Stream) bodyDrained() {
	if d := st.reader(); d != nil {
		if len(d.body.held) > 0 || d.body.ended {
			d.deliverLater()
			return
		}
		if d.body.readPaused {
			d.body.readPaused = false
			st.giveBack()
		}
		return
	}
	if x := st.stdx; x != nil && x.readPaused {
		x.readPaused = false
		st.giveBack()
	}
}

func (st *h2Stream) canHijack() bool { return false }

func (st *h2Stream) handOver(vnet.Handler) {}

// report tells the completion hook about the stream's request, if it was
// begun (only with a hook) and not reported yet.
func (st *h2Stream) report(completed bool) {
	if st.rec.pending {
		st.hc.srv.complete(st.hc.ls, &st.rec, st.hc.cs.c, completed)
	}
}

// errStreamReset is what a FromStd handler's body read gets when its
// stream is reset.
var errStreamReset = errors.New("http: HTTP/2 stream reset")

// closeStream closes st, with RST_STREAM code when rst is set; a handler
// still running sees its context canceled and its writes dropped.
func (hc *h2Conn) closeStream(st *h2Stream, code h2.ErrCode, rst bool) {
	if st.closed {
		return
	}
	st.closed = true
	st.report(st.localDone) // unless the answer's end reported it
	if rst {
		hc.writeRST(st.id, code)
		hc.markReset(st.id)
	}
	hc.streams.remove(st.id)
	if st.cancel != nil {
		st.cancel()
		st.cancel = nil
	}
	if x := st.stdx; x != nil {
		st.stdx = nil
		err := error(errStreamReset)
		if st.localDone && st.remoteDone {
			err = net.ErrClosed
		}
		x.connClosed(err)
	}
	if f := st.writable; f != nil {
		st.writable = nil
		f(net.ErrClosed)
	}
	if st.bodyHeld > 0 {
		hc.srv.bodyBytes.Add(-st.bodyHeld)
		st.bodyHeld = 0
	}
	hc.pendingOut -= len(st.pending)
	st.pending, st.body = nil, nil
	if len(hc.streams) == 0 {
		hc.cs.phaseStart = hc.cs.now()
	}
	hc.closeIfDone()
	hc.arm()
}
