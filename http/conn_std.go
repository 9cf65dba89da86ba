package http

import (
	"io"

	"github.com/veloq/veloq/http/internal/h1"
)

// The HTTP/1 side of FromStd: the request body streamed from the
// connection's input into the exchange's pipe, and the connection's
// phases around it.

func (cs *conn) std() *stdExchange { return cs.stdx }

func (cs *conn) setStd(x *stdExchange) { cs.stdx = x }

// stdReturned: an HTTP/1 connection runs one FromStd handler at a time,
// and reads no further request until it returns, so it counts none.
func (cs *conn) stdReturned() {}

func (cs *conn) stdState() *stdConn {
	if cs.stdc == nil {
		cs.stdc = newStdConn(cs.srv, cs.c)
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
	cs.stdx = x
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

// feedStd moves request body bytes from the input into the pipe.
func (cs *conn) feedStd() {
	x := cs.stdx
	c := cs.c
	buf, _ := c.Peek(0)
	full := false
	if cs.chunked {
		off := 0
		for !x.bodyDone {
			k, data, done, err := cs.dec.Next(buf[off:])
			off += k
			if len(data) > 0 {
				full = x.pipe.write(data) || full
			}
			if done {
				x.bodyDone = true
			} else if err == h1.ErrNeedMore {
				break
			} else if err != nil {
				err = coreError(err) // the handler's Body.Read returns it
				c.Discard(off)
				x.pipe.closeWrite(err)
				cs.ls.st.protoErrors.Add(1)
				x.protocolError(ErrorStatus(err))
				return
			}
		}
		cs.bodyArrived(off)
		c.Discard(off)
	} else {
		k := min(int64(len(buf)), cs.remaining)
		if k > 0 {
			full = x.pipe.write(buf[:k])
		}
		cs.bodyArrived(int(k))
		c.Discard(int(k))
		cs.remaining -= k
		x.bodyDone = cs.remaining == 0
	}
	if x.bodyDone {
		x.pipe.closeWrite(io.EOF)
		if cs.phase == phaseStdBody {
			cs.phase = phaseBusy
		}
		return
	}
	if full {
		x.readPaused = true
		c.PauseRead() // a no-op if already paused
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
	if x := cs.stdx; x.readPaused {
		x.readPaused = false
		cs.restartBodyClock()
	}
	cs.c.ResumeRead()
}
