package http

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/veloq/veloq/executor"
	vnet "github.com/veloq/veloq/net"
)

// A Handler answers HTTP requests on the fast path: it runs inline on the
// connection's loop with the request as a view into the input and a
// [ResponseWriter] that buffers the answer, and must neither block nor
// keep r, r's byte slices or w after it returns. Wrap a handler that does
// heavy work with [Offloaded]; adapt a net/http handler with [FromStd].
//
// A panicking handler is recovered and logged; the client gets
// 500 Internal Server Error and its connection is closed.
type Handler interface {
	ServeHTTP(w *ResponseWriter, r *Request)
}

// HandlerFunc adapts a function to [Handler].
type HandlerFunc func(w *ResponseWriter, r *Request)

// ServeHTTP calls f(w, r).
func (f HandlerFunc) ServeHTTP(w *ResponseWriter, r *Request) { f(w, r) }

// A ResponseWriter collects a handler's response: status, header fields
// and body, all buffered. The server serializes it when the handler
// returns, with Date, Server, Content-Length and Connection handling
// (see [Response.AppendTo]). It allocates nothing once its buffers have
// grown to the sizes the handler uses.
type ResponseWriter struct {
	resp     Response
	cs       *conn
	head     []byte // the raw request head, for Offloaded
	job      *offloadJob
	panicked bool
	aborted  bool // the panic was net/http.ErrAbortHandler
	off      bool // running on a pool worker
	raddr    net.Addr
	hijack   vnet.Handler // set by Hijack: who gets the connection next
	std      *stdHandler  // a FromStd handler the chain called, to run next
	file     *fileBody    // a body ServeFile takes from a file (fs_send.go)
	ctx      context.Context

	// Streaming (Flush) by an offloaded handler.
	req       *Request // the request answered, for the head
	streamed  bool     // the head went out
	chunked   bool
	mustClose bool
	serr      error // the connection is gone
}

// ErrNotOffloaded is returned by [ResponseWriter.Flush] in a handler
// running inline on the loop, whose response can only leave when it
// returns.
var ErrNotOffloaded = errors.New("http: Flush is only available to offloaded handlers")

// Flush sends the status, the fields and the body written so far now,
// for an offloaded handler that produces its body bit by bit (progress,
// server-sent events, a large export): the response streams from here on,
// chunked for HTTP/1.1 (delimited by closing the connection for
// HTTP/1.0), each later Flush sending what was written since, and the
// handler's return ending it. Flush waits while the client is more than
// 256 KiB behind, so a slow reader slows the handler instead of filling
// memory; it fails once the connection is gone. An inline handler gets
// [ErrNotOffloaded]: it must not block, so it cannot wait for the client.
func (w *ResponseWriter) Flush() error {
	if !w.off || w.cs == nil || w.req == nil {
		return ErrNotOffloaded
	}
	if w.serr != nil {
		return w.serr
	}
	cs, c := w.cs, w.cs.c
	head := !w.streamed
	body := w.resp.body
	errc := make(chan error, 1)
	err := c.Loop().Post(func() {
		if c.Closed() {
			errc <- net.ErrClosed
			return
		}
		ls := cs.ls
		if head {
			if cs.srv.shutting.Load() {
				w.req.Close = true
			}
			ls.scratch = w.resp.AppendHead(ls.scratch[:0], w.req, cs.date(), -1)
			c.Write(ls.scratch)
			w.chunked, w.mustClose = w.resp.Chunked(), w.resp.ShouldClose()
		}
		cs.writeChunk(w, body)
		signalDrained(c, errc)
	})
	if err == nil {
		err = <-errc
	}
	w.streamed = true
	w.resp.body = body[:0]
	if err != nil {
		w.serr = err
	}
	return err
}

// writeChunk writes body as the next part of w's streamed response (on
// the loop).
func (cs *conn) writeChunk(w *ResponseWriter, body []byte) {
	if w.resp.BodyAllowed() {
		cs.writeBodyPart(body, w.chunked)
	}
}

// finishStreamed ends a response an offloaded handler streamed with Flush
// (on the loop) and reports whether the next request may be served.
func (cs *conn) finishStreamed(w *ResponseWriter) bool {
	cs.writeChunk(w, w.resp.body)
	if w.chunked && w.resp.BodyAllowed() {
		cs.c.Write(AppendLastChunk(cs.ls.scratch[:0]))
	}
	cs.ls.countServed(cs.c.Loop())
	if w.mustClose || !w.chunked && w.resp.BodyAllowed() {
		cs.linger()
		return false
	}
	cs.enterIdle()
	return true
}

// Context returns the request's context. For a handler running off the
// loop ([Offloaded], [WithOffload]) it is canceled when the client closes,
// half-closes or resets the connection, so long work can stop early; for
// an inline handler, which must not block anyway, it is
// context.Background().
func (w *ResponseWriter) Context() context.Context {
	if w.ctx != nil {
		return w.ctx
	}
	return context.Background()
}

func (w *ResponseWriter) reset(cs *conn, req *Request, head, body []byte) {
	w.resp.Reset(body)
	if w.file != nil {
		w.file.discard() // set by a handler that then panicked or hijacked
	}
	w.cs, w.head = cs, head
	w.job, w.panicked, w.aborted, w.hijack, w.std, w.file = nil, false, false, nil, nil, nil
}

// Hijack takes the connection away from the HTTP server once the handler
// returns: the response written so far is sent first (typically a
// 101 Switching Protocols head, written without a body), then h receives
// the connection as a TCP handler would. h.OnOpen runs at once, followed by
// h.OnData if the client sent bytes after the request; every later event
// (OnData, OnEOF when h implements it, OnClose) goes to h, and the server's
// timeouts, limits and connection count no longer apply to it. The
// connection context (Conn.Context) is h's to set.
//
// Only a handler running inline on the loop can hijack; an offloaded one
// gets [ErrHijackUnavailable]. As in net/http, Server.Shutdown does not
// wait for a hijacked connection (see Server.RegisterOnShutdown);
// Server.Close cuts it, as does a Shutdown whose context ends before the
// requests in progress do.
func (w *ResponseWriter) Hijack(h vnet.Handler) error {
	if h == nil {
		return errors.New("http: Hijack with a nil handler")
	}
	if w.off || w.cs == nil {
		return ErrHijackUnavailable
	}
	w.hijack = h
	return nil
}

// Header returns the response fields for the handler to fill. Framing
// fields (Content-Length, Transfer-Encoding) are ignored; "Connection:
// close" closes the connection after the response.
func (w *ResponseWriter) Header() *ResponseHeader { return w.resp.Header() }

// WriteHeader sets the status code (default 200). It may be called any
// time before the handler returns; the last call wins.
func (w *ResponseWriter) WriteHeader(code int) { w.resp.SetStatus(code) }

// Status returns the status code set so far.
func (w *ResponseWriter) Status() int { return w.resp.Status() }

// Write appends p to the body. It never fails.
func (w *ResponseWriter) Write(p []byte) (int, error) { return w.resp.Write(p) }

// WriteString appends s to the body. It never fails.
func (w *ResponseWriter) WriteString(s string) (int, error) { return w.resp.WriteString(s) }

// Body returns the body written so far.
func (w *ResponseWriter) Body() []byte { return w.resp.Body() }

// Conn returns the connection, for a handler running inline on its loop;
// nil for an offloaded handler, which must not touch the connection.
func (w *ResponseWriter) Conn() *vnet.Conn {
	if w.off || w.cs == nil {
		return nil
	}
	return w.cs.c
}

// RemoteAddr returns the client's address.
func (w *ResponseWriter) RemoteAddr() net.Addr {
	if w.off || w.cs == nil {
		return w.raddr
	}
	return w.cs.c.RemoteAddr()
}

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
	if w.off || w.cs == nil {
		o.h.ServeHTTP(w, r) // already off the loop
		return
	}
	w.job = newOffloadJob(w, r, o)
}

// An offloadJob is a request copied off the connection's input, with its
// own writer, run on a pool worker.
type offloadJob struct {
	o      *offloadHandler
	parser Parser
	buf    []byte
	req    Request
	w      ResponseWriter
	body   []byte
}

var jobPool = sync.Pool{New: func() any { return new(offloadJob) }}

func newOffloadJob(w *ResponseWriter, r *Request, o *offloadHandler) *offloadJob {
	j := jobPool.Get().(*offloadJob)
	j.o = o
	j.buf = append(append(j.buf[:0], w.head...), r.Body...)
	j.parser.Limits = w.cs.srv.opts.limits
	if _, err := j.parser.Parse(j.buf[:len(w.head)], &j.req); err != nil {
		panic("http: offloaded request does not parse again: " + err.Error())
	}
	if r.Body != nil {
		j.req.Body = j.buf[len(w.head):]
	}
	j.req.Close = r.Close
	j.req.params, j.req.nparams = r.params, r.nparams // spans of Path, parsed the same
	j.w.reset(w.cs, &j.req, nil, j.body)
	// What the chain before Offloaded set stays in the response.
	j.w.resp.SetStatus(w.resp.status)
	for _, f := range w.Header().Fields() {
		j.w.Header().AddBytes(f.Name, f.Value)
	}
	j.w.off = true
	j.w.req = &j.req
	j.w.raddr = w.cs.c.RemoteAddr()
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
	j.o, j.w.cs, j.w.raddr, j.w.ctx, j.w.req, j.w.file = nil, nil, nil, nil, nil, nil
	j.w.streamed, j.w.chunked, j.w.mustClose, j.w.serr = false, false, false, nil
	jobPool.Put(j)
}

// run runs the handler on a pool worker.
func (j *offloadJob) run(ctx context.Context) (struct{}, error) {
	j.w.ctx = ctx
	defer func() {
		if r := recover(); r != nil {
			j.w.panicked = true
			j.w.aborted = j.w.cs.srv.handlerPanicked(r, "remote", j.w.raddr)
		}
	}()
	j.o.h.ServeHTTP(&j.w, &j.req)
	return struct{}{}, nil
}

// offload hands job to the pool; its response is written back on the loop.
// The connection stays in phaseBusy meanwhile: input that arrives waits
// in the connection (bounded by the reactor's read buffer cap), so the
// next request waits for this one, while the client's FIN or reset is
// still seen and cancels the request's context.
func (cs *conn) offload(j *offloadJob) {
	cs.ls.st.offloaded.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	cs.offCancel = cancel
	c := cs.c
	var f *executor.Future[struct{}]
	if j.o.b != nil {
		f = executor.SubmitBlocking(j.o.b, ctx, j.run)
	} else {
		f = executor.Submit(j.o.p, ctx, j.run)
	}
	f.OnLoop(c.Loop(), func(_ struct{}, err error) {
		defer j.release()
		cancel()
		cs.offCancel = nil
		if c.Closed() {
			return
		}
		switch {
		case errors.Is(err, context.Canceled): // the client left before it ran
			cs.linger()
		case err != nil: // the pool refused the task
			cs.fail(StatusServiceUnavailable)
		case j.w.aborted:
			cs.linger()
		case j.w.panicked && j.w.streamed:
			// Part of the response is out: closing is the only way to
			// say it is incomplete.
			cs.ls.st.panics.Add(1)
			cs.linger()
		case j.w.panicked:
			cs.ls.st.panics.Add(1)
			cs.fail(StatusInternalServerError)
		default:
			if j.w.streamed {
				if !cs.finishStreamed(&j.w) {
					return
				}
			} else if body := j.w.file; body != nil {
				j.w.file = nil
				cs.sendFile(&j.w.resp, &j.req, body)
				return
			} else {
				cs.writeResponse(&j.w.resp, &j.req)
				if !cs.afterResponse(&j.w.resp) {
					return
				}
			}
			if cs.eof {
				cs.linger() // the client half-closed: nothing more will come
				return
			}
			// Present the input that waited (pipelined requests).
			c.Redeliver()
		}
	})
}
