package http

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/veloq/veloq/executor"
)

// Offloaded returns a handler that runs h on the stealable pool p instead
// of on the loop, for handlers that burn CPU. The request (head and body)
// is copied for it. Reading from the connection goes on meanwhile, but
// the requests pipelined behind it wait, so responses stay in order.
//
// Offloaded may be used anywhere in a chain of handlers: the part of the
// chain before it runs on the loop, and the status and fields it set are
// the offloaded handler's to start from.
func Offloaded(p *executor.Pool, h Handler) Handler { return &offloadHandler{p: p, h: h} }

// OffloadedBlocking is [Offloaded] on the blocking pool b, for handlers
// that block (files, a database driver, cgo, a lock): a blocked handler
// holds one of b's goroutines, never a loop or a stealable worker. When b
// is saturated the request is answered with 503 Service Unavailable.
func OffloadedBlocking(b *executor.BlockingPool, h Handler) Handler {
	return &offloadHandler{b: b, h: h}
}

type offloadHandler struct {
	p *executor.Pool
	b *executor.BlockingPool
	h Handler
}

func (o *offloadHandler) ServeHTTP(w *ResponseWriter, r *Request) {
	if w.off || w.ex == nil {
		o.h.ServeHTTP(w, r) // already off the loop
		return
	}
	w.then = then{step: stepOffload, job: newOffloadJob(w, r, o)}
}

// An offloadJob is a request copied off the connection's input, with its
// own writer, run on a pool worker.
type offloadJob struct {
	o    *offloadHandler
	buf  []byte
	req  Request
	w    ResponseWriter
	body []byte
}

var jobPool = sync.Pool{New: func() any { return new(offloadJob) }}

func newOffloadJob(w *ResponseWriter, r *Request, o *offloadHandler) *offloadJob {
	j := jobPool.Get().(*offloadJob)
	j.o = o
	j.buf = copyRequest(&j.req, r, j.buf)
	j.w.reset(w.ex, j.body)
	// What the chain before Offloaded set stays in the response.
	j.w.resp.SetStatus(w.resp.status)
	for _, f := range w.Header().Fields() {
		j.w.Header().AddBytes(f.Name, f.Value)
	}
	j.w.off = true
	j.w.req = &j.req
	j.w.raddr = w.ex.transport().RemoteAddr()
	return j
}

func (j *offloadJob) release() {
	if b := j.w.resp.Body(); cap(b) <= 64<<10 {
		j.body = b[:0]
	} else {
		j.body = nil
	}
	if cap(j.buf) > 64<<10 {
		j.buf = nil
	}
	if j.w.file != nil {
		j.w.file.discard() // not sent: the connection closed first
	}
	j.o, j.w.ex, j.w.raddr, j.w.ctx, j.w.req, j.w.file = nil, nil, nil, nil, nil, nil
	j.w.streamed, j.w.serr, j.w.then = false, nil, then{}
	jobPool.Put(j)
}

// run runs the handler on a pool worker.
func (j *offloadJob) run(ctx context.Context) (struct{}, error) {
	j.w.ctx = ctx
	defer func() {
		if r := recover(); r != nil {
			j.w.then = then{step: stepFail}
			if j.w.ex.shared().srv.handlerPanicked(r, "remote", j.w.raddr) {
				j.w.then.step = stepAbort
			}
		}
	}()
	j.o.h.ServeHTTP(&j.w, &j.req)
	return struct{}{}, nil
}

// offload hands job to the pool; its response is written back to ex on
// the loop. The protocol keeps the exchange waiting meanwhile (for
// HTTP/1, input that arrives waits in the connection, bounded by the
// reactor's read buffer cap, so the next request waits for this one),
// while the client's FIN or reset still cancels the request's context.
func offload(ex exchange, j *offloadJob) {
	ex.shared().st.offloaded.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	ex.cancelOnGone(cancel)
	c := ex.transport()
	var f *executor.Future[struct{}]
	if j.o.b != nil {
		f = executor.SubmitBlocking(ctx, j.o.b, j.run)
	} else {
		f = executor.Submit(ctx, j.o.p, j.run)
	}
	f.OnLoop(c.Loop(), func(_ struct{}, err error) {
		defer j.release()
		cancel()
		ex.cancelOnGone(nil)
		if c.Closed() {
			return
		}
		st := &ex.shared().st
		w := &j.w
		switch {
		case errors.Is(err, context.Canceled): // the client left before it ran
			ex.abort(nil)
		case err != nil: // the pool refused the task
			ex.fail(StatusServiceUnavailable)
		case w.then.step == stepAbort:
			ex.abort(nil)
		case w.then.step == stepFail:
			// Once part of the answer is out, closing is the only way to
			// say it is incomplete: fail does that.
			st.panics.Add(1)
			ex.fail(StatusInternalServerError)
		default:
			if body := w.file; body != nil {
				w.file = nil
				ex.writeFile(&w.resp, &j.req, body) // ends the exchange itself
				return
			}
			if w.streamed {
				ex.writeBody(w.resp.body)
			} else {
				ex.writeResponse(&w.resp, &j.req)
			}
			if ex.end(true) {
				ex.resume()
			}
		}
	})
}

// copyRequest makes dst a copy of src whose bytes live in buf (reused, and
// returned), for a handler that runs after src's input is gone.
func copyRequest(dst, src *Request, buf []byte) []byte {
	n := len(src.Method) + len(src.Target) + len(src.Host) + len(src.Upgrade) + len(src.Body)
	for _, f := range src.Headers {
		n += len(f.Name) + len(f.Value)
	}
	a := copier{buf: slices.Grow(buf[:0], n)}
	headers := dst.Headers[:0]
	*dst = *src
	dst.spans = nil // the parser's scratch stays with src
	dst.Method = a.put(src.Method)
	dst.Target = a.put(src.Target)
	if src.Path != nil {
		// Target is what comes before Path, Path, then '?' and Query.
		q := 0
		if src.Query != nil {
			q = len(src.Query) + 1
		}
		start := len(src.Target) - len(src.Path) - q
		dst.Path = dst.Target[start : start+len(src.Path) : start+len(src.Path)]
		if src.Query != nil {
			dst.Query = dst.Target[len(dst.Target)-len(src.Query):]
		}
	}
	dst.Host = a.put(src.Host)
	dst.Upgrade = a.put(src.Upgrade)
	for _, f := range src.Headers {
		headers = append(headers, HeaderField{Name: a.put(f.Name), Value: a.put(f.Value)})
	}
	dst.Headers = headers
	dst.Body = a.put(src.Body)
	return a.buf
}

// copier appends byte strings to one buffer, sized beforehand so that it
// never moves, and returns capped views of them.
type copier struct{ buf []byte }

func (c *copier) put(b []byte) []byte {
	if b == nil {
		return nil
	}
	s := len(c.buf)
	c.buf = append(c.buf, b...)
	return c.buf[s:len(c.buf):len(c.buf)]
}
