package http

import (
	"net"

	"github.com/veloq/veloq/http/internal/h1"
	vnet "github.com/veloq/veloq/net"
)

// The HTTP/1 connection is its own exchange: one request at a time, its
// answer framed with Content-Length or chunked, and the connection kept
// for the next request or closed after it.
var _ exchange = (*conn)(nil)

func (cs *conn) transport() *vnet.Conn { return cs.c }

func (cs *conn) shared() *loopState { return cs.ls }

// writeHead serializes the head of a streamed answer.
func (cs *conn) writeHead(resp *response, req *Request, cl int64) {
	if cs.ls.srv.shutting.Load() {
		req.Close = true
	}
	ls := cs.ls
	ls.scratch = resp.AppendHead(ls.scratch[:0], req, cs.date(), cl)
	cs.write(ls.scratch)
	cs.rec.status = resp.status // 0 is 200: see complete
	cs.outClose = resp.ShouldClose()
	cs.outBody = resp.BodyAllowed()
	cs.outChunked = resp.Chunked() && cs.outBody
	cs.outStarted = true
}

// writeBody queues p as the next part of the streamed body.
func (cs *conn) writeBody(p []byte) {
	if cs.outBody {
		cs.writeBodyPart(p, cs.outChunked)
	}
}

// forwardBody queues src's next n bytes as the next part of the body. A
// part sent as it is goes by src.ForwardTo, so on io_uring a part that
// ends its receive buffer is sent from that buffer instead of copied; a
// chunk is framed around a copy.
func (cs *conn) forwardBody(src *vnet.Conn, n int) {
	switch {
	case !cs.outBody:
	case cs.outChunked:
		p, _ := src.Peek(n)
		cs.writeBodyPart(p, true)
	default:
		cs.ls.flushPending()
		m, _ := src.ForwardTo(cs.c, n)
		cs.rec.out += int64(m)
		n -= m
	}
	src.Discard(n) // what was not forwarded: framed, dropped or refused
}

func (cs *conn) whenWritable(f func(error)) { whenDrained(cs.c, f) }

// buffered is the connection's pending output: one answer is in progress
// at a time.
func (cs *conn) buffered() int { return cs.c.OutputBuffered() }

// whenDrained calls f(nil) once c's pending output is down to stdOutHigh,
// or f(net.ErrClosed) if c closes first: a writer off the loop waits on
// it before producing more.
func whenDrained(c *vnet.Conn, f func(error)) {
	c.OnDrain(stdOutHigh, func() {
		if c.Closed() {
			f(net.ErrClosed)
			return
		}
		f(nil)
	})
}

// end ends the answer (the last chunk of a chunked body), counts the
// request and moves on: to the next request, or to closing when the
// answer, the client or the server says so.
func (cs *conn) end(reusable bool) bool {
	if cs.outChunked {
		cs.write(appendLastChunkTrailers(cs.ls.scratch[:0], cs.outTrailers))
	}
	cs.report(true)
	cs.outTrailers = nil
	closing := cs.outClose || !reusable
	cs.outStarted, cs.outChunked, cs.outClose = false, false, false
	cs.answered = true
	cs.ls.countServed(cs.c.Loop())
	if closing || cs.eof || cs.ls.srv.shutting.Load() {
		cs.linger()
		return false
	}
	if cs.c.Buffered() != 0 && cs.ls.inline == cs && !cs.c.Backlogged() {
		// In serveLoop's batch, whose next round parses the next request
		// at once: the idle phase it would leave straight away, and its
		// deadline, are skipped (19 instructions a pipelined request,
		// callgrind, BenchmarkServerFastPath depth=16).
		cs.phase, cs.phaseStart = phaseHead, cs.now()
		return true
	}
	cs.enterIdle()
	if cs.c.Buffered() == 0 {
		cs.release() // begin takes one again with the next request's first byte
	}
	return true
}

// resume presents the input that waited (pipelined requests) again.
func (cs *conn) resume() {
	cs.c.ResumeRead()
	cs.c.Redeliver()
}

func (cs *conn) abort(err error) {
	cs.report(false)
	if err != nil {
		cs.ls.flushPending() // the order stays; Abort drops it all anyway
		cs.c.Abort(err)
		return
	}
	cs.linger()
}

func (cs *conn) cancelOnGone(cancel func()) {
	if cs.reqState == nil && cancel == nil {
		return // the request ended and its state went back to the loop
	}
	cs.begin()
	cs.offCancel = cancel
}

func (cs *conn) canHijack() bool { return true }

func (cs *conn) writeTrailers(t *ResponseHeader) {
	if cs.outChunked {
		cs.outTrailers = t
	}
}

// appendLastChunkTrailers appends the last chunk with the trailer section
// t (RFC 9112 §7.1.2); framing fields are left out.
func appendLastChunkTrailers(dst []byte, t *ResponseHeader) []byte {
	if t == nil || t.Len() == 0 {
		return h1.AppendLastChunk(dst)
	}
	dst = append(dst, "0\r\n"...)
	for i := range t.fields {
		name := t.name(i)
		if specialName(name) == hasFraming {
			continue
		}
		dst = append(dst, name...)
		dst = append(dst, ':', ' ')
		dst = append(dst, t.value(i)...)
		dst = append(dst, '\r', '\n')
	}
	return append(dst, '\r', '\n')
}
