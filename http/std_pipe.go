package http

import (
	"io"
	"maps"
	nethttp "net/http"
	"os"
	"sync"
	"time"
)

// bodyPipe carries a request body from the loop to the handler. The loop
// never blocks: it appends, and pauses reading from the client when more
// than stdPipeCap waits; the reader resumes it once half is drained.
type bodyPipe struct {
	x         *stdExchange
	mu        sync.Mutex
	cond      sync.Cond
	buf       []byte
	r         int
	err       error // set by the loop: io.EOF at the end of the body
	rclosed   bool
	paused    bool // the loop stopped reading because of this pipe
	readStart bool
	deadline  time.Time   // set by SetReadDeadline; zero: none
	dtimer    *time.Timer // wakes readers at the deadline
	// trailer holds the body's trailer fields, set by the loop before
	// the end; the reader hands them to the request at io.EOF
	// (giveTrailer), and forgets them.
	trailer nethttp.Header
}

func newBodyPipe(x *stdExchange) *bodyPipe {
	p := &bodyPipe{x: x}
	p.cond.L = &p.mu
	return p
}

// setDeadline makes Reads that would wait past t fail with
// os.ErrDeadlineExceeded; a zero t removes the deadline.
func (p *bodyPipe) setDeadline(t time.Time) {
	p.mu.Lock()
	p.deadline = t
	if p.dtimer != nil {
		p.dtimer.Stop()
		p.dtimer = nil
	}
	if !t.IsZero() {
		p.dtimer = time.AfterFunc(time.Until(t), func() {
			p.mu.Lock()
			p.cond.Broadcast()
			p.mu.Unlock()
		})
	}
	p.mu.Unlock()
	p.cond.Broadcast()
}

// write appends b (loop side) and reports whether the pipe is over its
// capacity.
func (p *bodyPipe) write(b []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rclosed || p.err != nil {
		return false
	}
	if p.r > 0 {
		n := copy(p.buf, p.buf[p.r:])
		p.buf, p.r = p.buf[:n], 0
	}
	if p.buf == nil {
		p.buf = p.x.srv.pipeBufs.Get(max(len(b), bodyMinAlloc))[:0]
	}
	p.buf = append(p.buf, b...)
	p.cond.Signal()
	if len(p.buf) > stdPipeCap {
		p.paused = true
		return true
	}
	return false
}

// setTrailer is the protocol's, before it ends the body complete: the
// HTTP/1 trailer section's field lines (validated by the decoder).
func (p *bodyPipe) setTrailer(lines []byte) {
	eachField(lines, func(name, value []byte) { p.addTrailer(string(name), string(value)) })
}

// addTrailer adds a trailer field (loop side), before the body's end.
func (p *bodyPipe) addTrailer(name, value string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rclosed {
		return // the handler closed the body: nothing reads to its end
	}
	if p.trailer == nil {
		p.trailer = make(nethttp.Header)
	}
	p.trailer.Add(name, value)
}

// giveTrailer sets the trailer fields in the handler's request, as
// net/http does in the Read that reaches the body's end: over HTTP/1,
// each field received; over HTTP/2, only those the Trailer field
// announced. It runs on the handler's goroutine, which owns the
// request.
func (p *bodyPipe) giveTrailer() {
	t := p.trailer
	if t == nil {
		return
	}
	p.trailer = nil
	req := p.x.req
	if p.x.head.major == 2 {
		for k, vs := range t {
			if _, ok := req.Trailer[k]; ok {
				req.Trailer[k] = vs
			}
		}
		return
	}
	if req.Trailer == nil {
		req.Trailer = t
		return
	}
	maps.Copy(req.Trailer, t)
}

// closeWrite ends the body (loop side) with err, io.EOF for a complete one.
func (p *bodyPipe) closeWrite(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Read implements io.Reader for the handler.
func (p *bodyPipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	if !p.readStart {
		p.readStart = true
		if p.x.expect100 {
			x := p.x
			_ = x.c.Loop().Post(func() {
				if x.current() {
					x.continued = true
					x.ex.askBody(!x.headSent && !x.bodyDone)
				}
			})
		}
	}
	for len(p.buf)-p.r == 0 && p.err == nil && !p.rclosed {
		if !p.deadline.IsZero() && !time.Now().Before(p.deadline) {
			p.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		}
		if p.buf != nil {
			// A handler waiting on a client that stalls holds no buffer;
			// the next write borrows one again from the pool.
			p.x.srv.pipeBufs.Put(p.buf)
			p.buf, p.r = nil, 0
		}
		p.cond.Wait()
	}
	if p.rclosed {
		p.mu.Unlock()
		return 0, nethttp.ErrBodyReadAfterClose
	}
	if len(p.buf)-p.r == 0 {
		err := p.err
		if err == io.EOF {
			p.giveTrailer()
		}
		p.mu.Unlock()
		return 0, err
	}
	n := copy(b, p.buf[p.r:])
	p.r += n
	if p.r == len(p.buf) {
		p.buf, p.r = p.buf[:0], 0
	}
	resume := p.paused && len(p.buf)-p.r <= stdPipeCap/2
	if resume {
		p.paused = false
	}
	p.mu.Unlock()
	if resume {
		_ = p.x.c.Loop().Post(p.x.resumeRead)
	}
	return n, nil
}

// Close implements io.Closer: the rest of the body is discarded.
func (p *bodyPipe) Close() error {
	p.mu.Lock()
	if p.dtimer != nil {
		p.dtimer.Stop()
		p.dtimer = nil
	}
	p.rclosed = true
	p.buf, p.r = nil, 0
	resume := p.paused
	p.paused = false
	p.mu.Unlock()
	p.cond.Broadcast()
	if resume {
		_ = p.x.c.Loop().Post(p.x.resumeRead)
	}
	return nil
}
