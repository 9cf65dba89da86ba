package http

import (
	"io"

	"github.com/veloq/veloq/http/internal/h1"
)

// The HTTP/1 side of FromStd: the request body streamed from the
// connection's input into the exchange's pipe, and the connection's
// phases around it.

func (cs *conn) std() *stdExchange {
	if cs.stdc == nil {
		return nil
	}
	return cs.stdc.x
}

func (cs *conn) setStd(x *stdExchange) {
	if x != nil || cs.stdc != nil {
		cs.stdState().x = x
	}
}

// stdReturned: an HTTP/1 connection runs one FromStd handler at a time,
// and reads no further request until it returns, so it counts none.
func (cs *conn) stdReturned() {}

func (cs *conn) stdState() *stdConn {
	if cs.stdc == nil {
		cs.stdc = newStdConn(cs.ls.srv, cs.c)
	}
	return cs.stdc
}

// startStd begins a FromStd request whose head was just parsed (and
// consumed from the input). With a non-nil w, sh is not the root (see
// newStdExchange): the body was collected and is copied, so the caller may
// consume the request from the input at once.
func (cs *conn) startStd(sh *stdHandler, req *Request, w *ResponseWriter) {
	x, err := newStdExchange(cs, cs.stdState(), sh, req, w)
	if err != nil {
		cs.ls.st.protoErrors.Add(1)
		cs.fail(StatusBadRequest)
		return
	}
	cs.stdc.x = x
	cs.phase = phaseBusy
	switch {
	case w != nil:
	case req.HasBody():
		x.streamBody(req.Expect100)
		cs.chunked = req.Chunked
		cs.remaining = req.ContentLength
		cs.dec.Reset()
		cs.phase = phaseStdBody
	default:
		x.bodyDone = true
	}
	if !x.start() {
		return
	}
	if cs.phase == phaseStdBody {
		cs.startBodyClock()
		cs.feedStd()
	}
}

// bodyWriter takes a request body streamed from the loop: FromStd's
// pipe, or a detached answer's reader (OnBody). write reports whether the
// reader is behind, so that the connection stops reading.
type bodyWriter interface {
	write(p []byte) (full bool)
	// setTrailer takes a chunked body's trailer field lines, before
	// closeWrite ends the body.
	setTrailer(lines []byte)
	closeWrite(err error)
}

// takeBody moves the request body bytes in the input to w, up to the
// body's end. It reports whether the body ended, whether w is full, and a
// malformed chunked body's error (the bytes before it were moved).
func (cs *conn) takeBody(w bodyWriter) (done, full bool, err error) {
	c := cs.c
	buf, _ := c.Peek(0)
	if !cs.chunked {
		k := min(int64(len(buf)), cs.remaining)
		if k > 0 {
			full = w.write(buf[:k])
		}
		cs.bodyArrived(int(k))
		c.Discard(int(k))
		cs.remaining -= k
		return cs.remaining == 0, full, nil
	}
	off := 0
	for !done {
		in := buf[off:]
		k, data, end, e := cs.dec.Next(in)
		off += k
		if len(data) > 0 {
			full = w.write(data) || full
		}
		if end {
			done = true
			w.setTrailer(cs.dec.Trailer(in)) // before the input is discarded
		} else if e == h1.ErrNeedMore {
			break
		} else if e != nil {
			err = coreError(e)
			break
		}
	}
	cs.bodyArrived(off)
	c.Discard(off)
	return done, full, err
}

// feedStd moves request body bytes from the input into the pipe.
func (cs *conn) feedStd() {
	x := cs.std()
	done, full, err := cs.takeBody(x.pipe)
	if err != nil {
		x.pipe.closeWrite(err) // the handler's Body.Read returns it
		cs.ls.st.protoErrors.Add(1)
		x.protocolError(ErrorStatus(err))
		return
	}
	if done {
		x.bodyDone = true
		x.pipe.closeWrite(io.EOF)
		if cs.phase == phaseStdBody {
			cs.phase = phaseBusy
		}
		return
	}
	if full {
		x.readPaused = true
		cs.c.PauseRead() // a no-op if already paused
	}
}

// serveStreamed runs a StreamBody handler on a request whose body
// follows its head (already consumed): the body streams to the handler's
// Responder (OnBody) as it arrives, in phaseDetBody.
func (cs *conn) serveStreamed(req *Request) {
	cs.dec.Reset()
	// An answer given other than by Detach leaves the body unread, in
	// the way of the next request: it goes with "Connection: close".
	cs.keepAsked = !req.Close
	req.Close, req.bodyStreams = true, true
	cs.serve(req, 0)
	req.bodyStreams = false
}

// feedLater presents the kept input again, once the callback that kept
// it has returned (the loop keeps unconsumed input only then).
func (cs *conn) feedLater() {
	if cs.phase == phaseDetBody && !cs.c.Closed() {
		cs.c.Redeliver()
	}
}

// feedDetached moves request body bytes from the input to the detached
// answer reading them, once it asked (OnBody); while its reader is
// behind, the connection stops reading, so the input holds at most what
// one read brought.
func (cs *conn) feedDetached() {
	d := cs.dbody
	if d.body.state == bodyUnread {
		// Not asked for yet: the input waits, and no more is read, until
		// OnBody (bodyDrained).
		d.body.readPaused = true
		cs.c.PauseRead()
		return
	}
	if d.body.state != bodyReading || d.body.readPaused {
		return // the input waits for ResumeBody
	}
	done, full, err := cs.takeBody(d)
	if cs.phase != phaseDetBody {
		return // the reader ended the answer meanwhile
	}
	if err != nil {
		cs.ls.st.protoErrors.Add(1)
		cs.phase = phaseBusy // bodyComplete is false: the connection closes
		d.closeWrite(err)
		return
	}
	if done {
		cs.phase = phaseBusy
		d.closeWrite(io.EOF)
		return
	}
	if full && cs.phase == phaseDetBody && d.body.state == bodyReading {
		d.body.readPaused = true
		cs.c.PauseRead()
	}
}

// askBody sends 100 Continue if asked and restarts the body clocks: the
// client was waiting for us.
func (cs *conn) askBody(send100 bool) {
	if send100 {
		cs.writeContinue()
	}
	cs.restartBodyClock()
}

func (cs *conn) writeContinue() {
	ls := cs.ls
	ls.scratch = h1.AppendContinue(ls.scratch[:0])
	cs.write(ls.scratch)
}

// bodyDrained resumes reading. The connection's own read state says
// whether feedStd paused it: nothing else pauses a FromStd connection,
// and ResumeRead is a no-op if not paused.
func (cs *conn) bodyDrained() {
	if cs.phase == phaseDetBody {
		// A detached answer's reader asked for the body, or caught up:
		// the input that waited is presented again, from a deferred task:
		// inside this connection's OnData (the handler's run) the loop
		// has not kept it yet, so Redeliver would find nothing.
		cs.dbody.body.readPaused = false
		cs.restartBodyClock()
		cs.c.ResumeRead()
		if cs.feedFn == nil {
			cs.feedFn = cs.feedLater // made once, for connections that stream
		}
		cs.c.Loop().Defer(cs.feedFn)
		return
	}
	if x := cs.std(); x != nil && x.readPaused {
		x.readPaused = false
		cs.restartBodyClock()
	}
	cs.c.ResumeRead()
}
