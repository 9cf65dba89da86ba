package http

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	nethttp "net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veloq/veloq/executor"
	vnet "github.com/veloq/veloq/net"
)

// Sizes of the FromStd adapter's buffers.
const (
	// stdPipeCap is how much request body may wait for the handler before
	// the loop stops reading from the client.
	stdPipeCap = 64 << 10
	// stdStreamAt is how much response body the writer buffers before it
	// starts streaming (chunked, unless the handler set Content-Length).
	stdStreamAt = 32 << 10
	// stdOutHigh is the connection output above which a streaming handler
	// waits for the client to catch up.
	stdOutHigh = 256 << 10
)

// FromStd adapts a net/http handler. As the [Server]'s root handler it
// runs each request off the loop, by default on a goroutine of its own, so
// a handler that blocks (on its request body, a database, an upstream
// call) costs a goroutine and never holds a loop or a pool worker. It gets
// net/http semantics:
//
//   - a real *net/http.Request: method, URL, protocol, header, Host,
//     RemoteAddr, ContentLength, TransferEncoding, and a Body that streams
//     the request body as it arrives (when the handler does not keep up,
//     the loop stops reading from the client);
//   - a request context canceled when the client closes or resets the
//     connection, and when the handler returns;
//   - a ResponseWriter that buffers the body and sends it with
//     Content-Length when the handler returns, or streams it (chunked for
//     HTTP/1.1, unless the handler set Content-Length) once the handler
//     calls Flush (net/http.Flusher) or writes more than 32 KiB;
//   - Expect: 100-continue answered when the handler first reads the body;
//   - a panic answered with 500 if nothing was sent, the connection closed
//     either way; panic(net/http.ErrAbortHandler) only closes it, unlogged;
//   - net/http.Hijacker: the connection leaves the server as a net.Conn
//     built on the reactor, with the bytes already read readable first
//     (WebSocket libraries work unchanged);
//   - what net/http.NewResponseController looks for: read and write
//     deadlines, EnableFullDuplex and FlushError;
//   - net/http.ServerContextKey (a *net/http.Server describing this server,
//     whose RegisterOnShutdown functions run on Shutdown) and
//     LocalAddrContextKey in the request context.
//
// Responses on a keep-alive connection go out in request order: the next
// request is read when the previous response is complete. A body that
// stops arriving fails the handler's Body.Read with [ErrBodyReadTimeout]
// after the read-body timeout ([WithReadBodyTimeout]).
//
// The options choose where the handler runs ([StdOnBlockingPool] bounds
// the goroutines, [StdOnPool] runs CPU-bound handlers that never block on
// the stealable pool) and bound the streamed body ([StdMaxBodyBytes]). A
// nil option is ignored, so FromStd(h, nil) is the default.
//
// Below the root, called on the loop by a fast handler chain (e.g. a
// middleware that wraps it), it runs off the loop all the same, once the
// chain returns: the body has then been collected under the server's
// [Limits], the fields the chain set on its ResponseWriter start the
// response, and what the chain writes after calling it is dropped. Under
// [Offloaded] it runs on that pool's worker with the response buffered
// until it returns (Flush commits only the status and header).
func FromStd(h nethttp.Handler, opts ...StdOption) Handler {
	sh := &stdHandler{h: h}
	for _, o := range opts {
		if o != nil {
			o(&sh.cfg)
		}
	}
	return sh
}

// A StdOption configures a [FromStd] handler.
type StdOption func(*stdConfig)

type stdConfig struct {
	pool     *executor.Pool
	blocking *executor.BlockingPool
	maxBody  int64 // <= 0: unlimited
}

// StdMaxBodyBytes bounds a FromStd handler's request body, which streams
// to the handler through a small buffer rather than being collected: a
// larger Content-Length, or a chunked body that grows past n, is answered
// with 413 Content Too Large. n <= 0 means no limit, which is the default,
// as in net/http (whose handlers bound bodies with http.MaxBytesReader).
// The server's [Limits.MaxBodyBytes] does not apply to streamed bodies.
func StdMaxBodyBytes(n int64) StdOption {
	return func(c *stdConfig) { c.maxBody = n }
}

// bodyLimit is the MaxBodyBytes the parser and the chunked decoder apply
// when this handler is the root.
func (sh *stdHandler) bodyLimit() int64 {
	if sh.cfg.maxBody > 0 {
		return sh.cfg.maxBody
	}
	return math.MaxInt64
}

// StdOnPool runs the handler on the stealable pool p instead of on a
// goroutine of its own. Only for CPU-bound handlers that never block: a
// handler waiting on its request body, a lock or the network holds one of
// p's few workers meanwhile, and a handful of slow clients can then stall
// every request. A nil p means the default.
func StdOnPool(p *executor.Pool) StdOption {
	return func(c *stdConfig) { c.pool, c.blocking = p, nil }
}

// StdOnBlockingPool runs the handler on b, whose goroutines are bounded
// and reused: blocking is fine there. When b is saturated (all its
// goroutines busy and its queue full) the request is answered with
// 503 Service Unavailable. A nil b means the default.
func StdOnBlockingPool(b *executor.BlockingPool) StdOption {
	return func(c *stdConfig) { c.blocking, c.pool = b, nil }
}

// stdHandler is the Handler FromStd returns. The server recognises it as
// its root handler and drives it through stdExchange.
type stdHandler struct {
	h   nethttp.Handler
	cfg stdConfig
}

// spawn starts x's handler where the configuration says.
func (sh *stdHandler) spawn(x *stdExchange) error {
	switch {
	case sh.cfg.pool != nil:
		return sh.cfg.pool.Spawn(x.run)
	case sh.cfg.blocking != nil:
		return sh.cfg.blocking.Submit(x.run)
	}
	go x.run()
	return nil
}

// ServeHTTP serves a request that reached sh through another handler.
// On the loop, it arranges for the server to run sh as it runs a root
// FromStd handler once the chain returns (see FromStd). Elsewhere (under
// Offloaded, already off the loop) it runs h here with a buffered writer.
func (sh *stdHandler) ServeHTTP(w *ResponseWriter, r *Request) {
	if w.cs != nil && !w.off {
		w.std = sh
		return
	}
	var raddr string
	if w.cs != nil || w.raddr != nil {
		raddr = w.RemoteAddr().String()
	}
	sreq, err := stdRequest(context.Background(), r, raddr, nil)
	if err != nil {
		w.WriteHeader(StatusBadRequest)
		return
	}
	if w.cs != nil {
		sreq.TLS = w.cs.c.TLS()
	}
	if len(r.Body) > 0 {
		sreq.Body = io.NopCloser(bytes.NewReader(r.Body))
	}
	rec := &inlineStdWriter{w: w, header: make(nethttp.Header)}
	sh.h.ServeHTTP(rec, sreq)
	rec.WriteHeader(StatusOK)
}

// inlineStdWriter is the net/http.ResponseWriter of a FromStd handler run
// under Offloaded: it writes through to the offloaded ResponseWriter, which
// buffers the whole response.
type inlineStdWriter struct {
	w      *ResponseWriter
	header nethttp.Header
	wrote  bool
}

var _ nethttp.Flusher = (*inlineStdWriter)(nil)

// Flush implements net/http.Flusher. The response is buffered until the
// handler returns, so there is nothing to send early: only the header is
// committed.
func (rw *inlineStdWriter) Flush() { rw.WriteHeader(StatusOK) }

func (rw *inlineStdWriter) Header() nethttp.Header { return rw.header }

func (rw *inlineStdWriter) WriteHeader(code int) {
	if rw.wrote || code < 200 {
		return
	}
	rw.wrote = true
	rw.w.WriteHeader(code)
	for k, vs := range rw.header {
		for _, v := range vs {
			rw.w.Header().Add(k, v)
		}
	}
}

func (rw *inlineStdWriter) Write(p []byte) (int, error) {
	rw.WriteHeader(StatusOK)
	return rw.w.Write(p)
}

// stdRequest builds a net/http request from a parsed head, like
// net/http's server does. scratch, if not nil, is a reusable buffer for
// building the header.
func stdRequest(ctx context.Context, r *Request, raddr string, scratch *[]byte) (*nethttp.Request, error) {
	method, _ := internMethod(r.Method)
	h, strs := stdHeader(r.Headers, scratch, r.Target, r.Host)
	// A value here and one copy in WithContext: the only Request on the heap
	// is the one the handler gets.
	sr := nethttp.Request{
		Method:        method,
		RequestURI:    strs[0],
		ProtoMajor:    1,
		ProtoMinor:    r.ProtoMinor,
		Header:        h,
		ContentLength: r.ContentLength,
		Close:         r.Close,
		Body:          nethttp.NoBody,
		RemoteAddr:    raddr,
	}
	if r.ProtoMinor == 0 {
		sr.Proto = "HTTP/1.0"
	} else {
		sr.ProtoMinor = 1
		sr.Proto = "HTTP/1.1"
	}
	var err error
	if sr.Method == "CONNECT" && len(r.Target) > 0 && r.Target[0] != '/' {
		sr.URL = &url.URL{Host: sr.RequestURI}
	} else if sr.URL, err = url.ParseRequestURI(sr.RequestURI); err != nil {
		return nil, err
	}
	sr.Host = sr.URL.Host
	if sr.Host == "" {
		sr.Host = strs[1]
	}
	switch {
	case r.Chunked:
		sr.ContentLength = -1
		sr.TransferEncoding = []string{"chunked"}
		sr.Header.Del("Transfer-Encoding")
	case r.ContentLength < 0:
		sr.ContentLength = 0
	}
	return sr.WithContext(ctx), nil
}

// stdHeader builds a request's net/http.Header (without Host, which
// net/http moves to Request.Host) with three allocations whatever the
// number of fields: the map, one string holding every canonical name and
// value, and one backing array for the value slices. Each slice is capped
// at its length, so a handler appending to one gets a copy. The extra
// byte slices are returned as strings from the same allocation.
func stdHeader(fields []HeaderField, scratch *[]byte, extra ...[]byte) (nethttp.Header, [2]string) {
	var arena []byte
	if scratch != nil {
		arena = (*scratch)[:0]
	}
	for _, e := range extra {
		arena = append(arena, e...)
	}
	n := 0
	for _, f := range fields {
		if equalFold(f.Name, "Host") {
			continue
		}
		n++
		start := len(arena)
		arena = append(arena, f.Name...)
		canonicalizeKey(arena[start:])
		arena = append(arena, f.Value...)
	}
	s := string(arena)
	if scratch != nil && cap(arena) <= 64<<10 {
		*scratch = arena[:0]
	}
	var strs [2]string
	off := 0
	for i, e := range extra[:min(len(extra), 2)] {
		strs[i] = s[off : off+len(e)]
		off += len(e)
	}
	h := make(nethttp.Header, n)
	if n == 0 {
		return h, strs
	}
	vals := make([]string, n)
	i := 0
	for _, f := range fields {
		if equalFold(f.Name, "Host") {
			continue
		}
		k := s[off : off+len(f.Name)]
		off += len(f.Name)
		v := s[off : off+len(f.Value)]
		off += len(f.Value)
		if prev, ok := h[k]; ok {
			h[k] = append(prev, v)
			continue
		}
		vals[i] = v
		h[k] = vals[i : i+1 : i+1]
		i++
	}
	return h, strs
}

// canonicalizeKey rewrites a field name (a token, as the parser checked)
// in place to the form net/textproto.CanonicalMIMEHeaderKey gives it: the
// first letter and each letter after a hyphen upper case, the others
// lower case.
func canonicalizeKey(k []byte) {
	upper := true
	for i, c := range k {
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		k[i] = c
		upper = c == '-'
	}
}

// Methods as strings and byte slices, so that the common ones cost no
// allocation per request.
var (
	methodGET     = []byte("GET")
	methodHEAD    = []byte("HEAD")
	methodPOST    = []byte("POST")
	methodPUT     = []byte("PUT")
	methodDELETE  = []byte("DELETE")
	methodPATCH   = []byte("PATCH")
	methodOPTIONS = []byte("OPTIONS")
)

// internMethod returns m as a string and as a byte slice that outlives
// the input buffer, shared for the common methods.
func internMethod(m []byte) (string, []byte) {
	switch string(m) {
	case "GET":
		return "GET", methodGET
	case "HEAD":
		return "HEAD", methodHEAD
	case "POST":
		return "POST", methodPOST
	case "PUT":
		return "PUT", methodPUT
	case "DELETE":
		return "DELETE", methodDELETE
	case "PATCH":
		return "PATCH", methodPATCH
	case "OPTIONS":
		return "OPTIONS", methodOPTIONS
	}
	s := string(m)
	return s, []byte(s)
}

// stdExchange is one FromStd request in progress. The loop owns the
// fields marked "loop"; the handler's goroutine owns the writer; they meet
// in the body pipe and in closures posted to the loop.
type stdExchange struct {
	sh   *stdHandler
	cs   *conn
	c    *vnet.Conn
	ctx  reqContext // the request's context, canceled by cancel
	req  *nethttp.Request
	vreq Request // method, version and Close, for serializing the head
	pipe *bodyPipe
	w    stdWriter

	// loop
	chunked   bool
	remaining int64
	bodyDone  bool
	expect100 bool
	headSent  bool
	// readPaused is set while the loop stopped reading because the
	// handler did not keep up: the body timeout does not run meanwhile.
	readPaused bool
	// continued is set once the handler asked for the body of an
	// Expect: 100-continue request: until then the client waits for us,
	// and the body timeout does not run.
	continued bool
}

// startStd begins a FromStd request whose head was just parsed (and
// consumed from the input).
//
// With a non-nil w, sh is not the root: a fast handler chain called it on
// the loop through w, the body was collected (req.Body), and the fields
// the chain set on w are the response's first fields. The request's bytes
// are copied, so the caller may consume them from the input at once.
func (cs *conn) startStd(sh *stdHandler, req *Request, w *ResponseWriter) {
	c := cs.c
	if cs.stdCtx == nil {
		// What net/http puts in every request's context.
		cs.stdCtx = context.WithValue(context.WithValue(context.Background(),
			nethttp.ServerContextKey, cs.srv.stdSrv), nethttp.LocalAddrContextKey, c.LocalAddr())
	}
	if cs.raddr == "" {
		cs.raddr = c.RemoteAddr().String()
	}
	x := &stdExchange{sh: sh, cs: cs, c: c}
	x.ctx.Context = cs.stdCtx
	sreq, err := stdRequest(&x.ctx, req, cs.raddr, &cs.ls.hdrScratch)
	if err != nil {
		cs.ls.st.protoErrors.Add(1)
		cs.fail(StatusBadRequest)
		return
	}
	sreq.TLS = c.TLS() // nil in plaintext, as net/http
	x.req = sreq
	_, mb := internMethod(req.Method)
	x.vreq = Request{Method: mb, ProtoMajor: 1, ProtoMinor: req.ProtoMinor, Close: req.Close}
	x.w = stdWriter{x: x, header: make(nethttp.Header), cl: -1, resp: cs.stdResp, buf: cs.stdBuf}
	cs.stdResp, cs.stdBuf = nil, nil
	if x.w.resp == nil {
		x.w.resp = new(Response)
	}
	cs.std = x
	cs.phase = phaseBusy
	if w != nil {
		for _, p := range req.params[:req.nparams] {
			sreq.SetPathValue(p.name, string(req.paramValue(p)))
		}
		for _, f := range w.Header().Fields() {
			x.w.header.Add(string(f.Name), string(f.Value))
		}
		x.bodyDone = true
		if len(req.Body) > 0 {
			x.pipe = &bodyPipe{x: x, buf: bytes.Clone(req.Body), err: io.EOF}
			x.pipe.cond.L = &x.pipe.mu
			sreq.Body = x.pipe
		}
	} else if req.HasBody() {
		x.pipe = &bodyPipe{x: x}
		x.pipe.cond.L = &x.pipe.mu
		sreq.Body = x.pipe
		x.chunked = req.Chunked
		x.remaining = req.ContentLength
		x.expect100 = req.Expect100
		cs.dec.Reset()
		cs.phase = phaseStdBody
	} else {
		x.bodyDone = true
	}
	cs.ls.st.offloaded.Add(1)
	if err := sh.spawn(x); err != nil {
		cs.std = nil
		x.cancel()
		cs.fail(StatusServiceUnavailable)
		return
	}
	if cs.phase == phaseStdBody {
		cs.startBodyClock()
		cs.feedStd()
	}
}

// cancel ends the request's context.
func (x *stdExchange) cancel() { x.ctx.cancel() }

// reqContext is a FromStd request's context, part of its exchange so that
// it costs no allocation of its own (context.WithCancel costs two). Values
// and the absent deadline come from the connection's base context, which
// is never canceled; Done's channel is made only if someone asks for it.
// It implements AfterFunc, which the context package uses to propagate
// cancellation to derived contexts without a goroutine each.
type reqContext struct {
	context.Context
	mu     sync.Mutex
	done   chan struct{}
	err    error
	afters map[*afterFn]struct{}
}

type afterFn struct{ f func() }

// Done implements context.Context.
func (c *reqContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

// Err implements context.Context.
func (c *reqContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc arranges for f to run in its own goroutine once c is
// canceled (at once if it is), like context.AfterFunc; stop unregisters f
// and reports whether it did so before f was started.
func (c *reqContext) AfterFunc(f func()) (stop func() bool) {
	a := &afterFn{f: f}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	if c.afters == nil {
		c.afters = make(map[*afterFn]struct{})
	}
	c.afters[a] = struct{}{}
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.afters[a]; !ok {
			return false
		}
		delete(c.afters, a)
		return true
	}
}

func (c *reqContext) cancel() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	if c.done != nil {
		close(c.done)
	}
	afters := c.afters
	c.afters = nil
	c.mu.Unlock()
	for a := range afters {
		go a.f()
	}
}

// String makes the context print as a request context.
func (c *reqContext) String() string { return "veloq/http.FromStd request context" }

// feedStd moves request body bytes from the input into the pipe.
func (cs *conn) feedStd() {
	x := cs.std
	c := cs.c
	buf, _ := c.Peek(0)
	full := false
	if x.chunked {
		off := 0
		for !x.bodyDone {
			k, data, done, err := cs.dec.Next(buf[off:])
			off += k
			if len(data) > 0 {
				full = x.pipe.write(data) || full
			}
			if done {
				x.bodyDone = true
			} else if err == ErrNeedMore {
				break
			} else if err != nil {
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
		k := min(int64(len(buf)), x.remaining)
		if k > 0 {
			full = x.pipe.write(buf[:k])
		}
		cs.bodyArrived(int(k))
		c.Discard(int(k))
		x.remaining -= k
		x.bodyDone = x.remaining == 0
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

// protocolError ends the exchange on a malformed body: the handler sees a
// read error, the client gets status (if no response started), and the
// connection closes.
func (x *stdExchange) protocolError(status int) {
	cs := x.cs
	x.cancel()
	cs.std = nil // the handler's further writes fail
	cs.fail(status)
}

// resumeRead runs on the loop when the handler has drained the pipe. The
// connection's own read state says whether feedStd paused it: nothing else
// pauses a FromStd connection, and ResumeRead is a no-op if not paused.
func (x *stdExchange) resumeRead() {
	if cs := x.cs; cs.std == x {
		if x.readPaused {
			x.readPaused = false
			cs.restartBodyClock()
		}
		x.c.ResumeRead()
	}
}

// peerGone runs on the loop when the client half-closed during the
// exchange: like net/http, the request's context is canceled.
func (x *stdExchange) peerGone() {
	x.cancel()
	if !x.bodyDone {
		x.pipe.closeWrite(io.ErrUnexpectedEOF)
	}
}

// connClosed runs on the loop when the connection is gone.
func (x *stdExchange) connClosed(err error) {
	x.cancel()
	if x.pipe != nil {
		if err == nil {
			err = net.ErrClosed
		}
		x.pipe.closeWrite(err)
	}
}

// run runs the handler on a pool worker.
func (x *stdExchange) run() {
	defer func() {
		if r := recover(); r != nil {
			x.w.panicked(x.cs.srv.handlerPanicked(r, "remote", x.req.RemoteAddr, "uri", x.req.RequestURI))
		}
	}()
	x.sh.h.ServeHTTP(&x.w, x.req)
	if x.w.hijacked {
		x.cancel() // the connection is the handler's; the request is over
		return
	}
	x.w.finish()
}

// done runs on the loop after the last bytes of the response were
// written: the connection moves on to the next request, or closes.
func (x *stdExchange) done(mustClose bool) {
	cs := x.cs
	x.cancel()
	if x.pipe != nil {
		x.pipe.Close()
	}
	// The handler has returned (done is posted after it), so the writer's
	// internal buffers are free for the connection's next request.
	if cs.stdResp == nil {
		cs.stdResp, x.w.resp = x.w.resp, nil
	}
	if cs.stdBuf == nil && cap(x.w.buf) <= 64<<10 {
		cs.stdBuf, x.w.buf = x.w.buf[:0], nil
	}
	if cs.std != x {
		return
	}
	cs.std = nil
	if x.c.Closed() {
		return
	}
	cs.ls.countServed(x.c.Loop())
	x.c.ResumeRead()
	if mustClose || !x.bodyDone || cs.eof || cs.srv.shutting.Load() {
		cs.linger()
		return
	}
	cs.enterIdle()
	// Present the input that waited (pipelined requests) again.
	x.c.Redeliver()
}

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
		p.buf = p.x.cs.srv.pipeBufs.Get(max(len(b), bodyMinAlloc))[:0]
	}
	p.buf = append(p.buf, b...)
	p.cond.Signal()
	if len(p.buf) > stdPipeCap {
		p.paused = true
		return true
	}
	return false
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
				if x.cs.std == x && !x.headSent && !x.bodyDone && !x.c.Closed() {
					x.c.Write(AppendContinue(nil))
				}
				if x.cs.std == x {
					x.continued = true
					x.cs.restartBodyClock()
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
			p.x.cs.srv.pipeBufs.Put(p.buf)
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

// stdWriter is the net/http.ResponseWriter of a FromStd handler. It runs
// on the handler's goroutine; everything it sends is posted to the loop.
type stdWriter struct {
	x           *stdExchange
	header      nethttp.Header
	noSniff     bool // Content-Type present (even empty) or nosniff
	status      int
	wroteHeader bool
	buf         []byte
	written     int64
	cl          int64     // the handler's Content-Length, or -1
	resp        *Response // the head, filled at WriteHeader
	streaming   bool      // the head went out: writes are sent as they come
	chunked     bool
	mustClose   bool
	err         error // the connection is gone, or hijacked
	hijacked    bool
	wdeadline   atomic.Int64 // SetWriteDeadline, UnixNano; 0: none
}

var (
	_ nethttp.ResponseWriter = (*stdWriter)(nil)
	_ nethttp.Flusher        = (*stdWriter)(nil)
	_ interface {
		SetReadDeadline(time.Time) error
		SetWriteDeadline(time.Time) error
		EnableFullDuplex() error
		FlushError() error
	} = (*stdWriter)(nil)
)

// Header implements net/http.ResponseWriter.
func (w *stdWriter) Header() nethttp.Header { return w.header }

// WriteHeader implements net/http.ResponseWriter. Informational (1xx)
// statuses are ignored, except 101 Switching Protocols, which is final
// (as in net/http) and is sent by Hijack or when the handler returns.
func (w *stdWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if (code < 200 || code > 999) && code != StatusSwitchingProtocols {
		if code < 100 || code > 999 {
			panic(fmt.Sprintf("invalid WriteHeader code %v", code))
		}
		return
	}
	w.wroteHeader = true
	w.status = code
	// The head is fixed now (later header changes have no effect, as in
	// net/http): copy it into the serializer's own storage.
	w.resp.Reset(nil)
	w.resp.SetStatus(code)
	h := w.resp.Header()
	for k, vs := range w.header {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	_, hasCT := w.header["Content-Type"]
	w.noSniff = hasCT || w.header.Get("X-Content-Type-Options") == "nosniff"
	if v := w.header.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			w.cl = n
		}
	}
}

func (w *stdWriter) bodyAllowed() bool {
	return w.status >= 200 && w.status != StatusNoContent && w.status != StatusNotModified
}

// Write implements net/http.ResponseWriter.
func (w *stdWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if !w.bodyAllowed() {
		return 0, nethttp.ErrBodyNotAllowed
	}
	if w.cl >= 0 && w.written+int64(len(p)) > w.cl {
		return 0, nethttp.ErrContentLength
	}
	w.written += int64(len(p))
	if w.x.vreq.IsHead() {
		if !w.streaming {
			w.buf = append(w.buf, p...) // for Content-Length and sniffing
			if len(w.buf) > stdStreamAt {
				w.buf = w.buf[:stdStreamAt]
			}
		}
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) >= stdStreamAt {
		if err := w.send(false); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// SetReadDeadline bounds the wait for request body bytes, for
// net/http.ResponseController: a Body.Read that would wait past t fails
// with os.ErrDeadlineExceeded. A zero t removes the deadline.
func (w *stdWriter) SetReadDeadline(t time.Time) error {
	if p := w.x.pipe; p != nil {
		p.setDeadline(t)
	}
	return nil
}

// SetWriteDeadline bounds the wait for the client to take streamed
// response bytes, for net/http.ResponseController: a Write or Flush still
// waiting at t fails with os.ErrDeadlineExceeded and the connection is
// dropped, as a net/http write timeout breaks its connection. A zero t
// removes the deadline.
func (w *stdWriter) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		w.wdeadline.Store(0)
	} else {
		w.wdeadline.Store(t.UnixNano())
	}
	return nil
}

// EnableFullDuplex lets the handler read the request body while it
// writes the response, for net/http.ResponseController. The body pipe
// always allows that, so there is nothing to switch on.
func (w *stdWriter) EnableFullDuplex() error { return nil }

// FlushError is Flush reporting the error, for
// net/http.ResponseController.
func (w *stdWriter) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(StatusOK)
	}
	return w.send(false)
}

// WriteString writes s like Write.
func (w *stdWriter) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

// Flush implements net/http.Flusher: the head and the body written so far
// go to the client now; the response streams from here on.
func (w *stdWriter) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(StatusOK)
	}
	_ = w.send(false)
}

// prepareHead completes the head WriteHeader filled (a sniffed
// Content-Type) and decides the framing of the response.
func (w *stdWriter) prepareHead(final bool) int64 {
	if w.bodyAllowed() && !w.noSniff && len(w.buf) > 0 {
		w.resp.Header().Set("Content-Type", nethttp.DetectContentType(w.buf))
	}
	switch {
	case !w.bodyAllowed():
		return 0
	case w.cl >= 0:
		return w.cl
	case final:
		return int64(len(w.buf))
	default:
		return -1 // chunked, or delimited by closing for HTTP/1.0
	}
}

// send posts the head (the first time) and the buffered body to the loop
// and waits until the loop has taken them and the connection's output is
// below stdOutHigh: the handler cannot outrun the client.
func (w *stdWriter) send(final bool) error {
	if w.err != nil {
		return w.err
	}
	var head bool
	var cl int64
	if !w.streaming {
		head = true
		cl = w.prepareHead(false)
		w.streaming = true
	}
	data := w.buf
	if w.x.vreq.IsHead() {
		data = nil
	}
	if len(data) == 0 && !head {
		return nil
	}
	x := w.x
	var deadline <-chan time.Time
	if dl := w.wdeadline.Load(); dl != 0 {
		d := time.Until(time.Unix(0, dl))
		if d <= 0 {
			return w.writeExpired()
		}
		t := time.NewTimer(d)
		defer t.Stop()
		deadline = t.C
	}
	errc := make(chan error, 1)
	err := x.c.Loop().Post(func() {
		c := x.c
		if c.Closed() || x.cs.std != x {
			errc <- net.ErrClosed
			return
		}
		if head {
			x.writeHead(w.resp, cl)
			w.chunked = w.resp.Chunked()
			w.mustClose = w.resp.ShouldClose()
		}
		x.cs.writeBodyPart(data, w.chunked)
		signalDrained(c, errc)
	})
	if err == nil {
		select {
		case err = <-errc:
		case <-deadline:
			return w.writeExpired()
		}
	}
	w.buf = w.buf[:0]
	if err != nil {
		w.err = err
	}
	return err
}

// writeExpired breaks the connection when a write deadline passed: the
// client has not taken what was sent, and the response cannot complete.
func (w *stdWriter) writeExpired() error {
	x := w.x
	w.err = os.ErrDeadlineExceeded
	w.buf = w.buf[:0]
	_ = x.c.Loop().Post(func() {
		if x.cs.std == x {
			x.c.Abort(os.ErrDeadlineExceeded)
		}
	})
	return w.err
}

// writeHead serializes the head on the loop, with the loop's date.
func (x *stdExchange) writeHead(resp *Response, cl int64) {
	cs := x.cs
	if cs.srv.shutting.Load() {
		x.vreq.Close = true
	}
	x.headSent = true
	ls := cs.ls
	ls.scratch = resp.AppendHead(ls.scratch[:0], &x.vreq, cs.date(), cl)
	x.c.Write(ls.scratch)
}

// finish completes the response after the handler returned.
func (w *stdWriter) finish() {
	if !w.wroteHeader {
		w.WriteHeader(StatusOK)
	}
	x := w.x
	if w.err != nil {
		x.postDone(true)
		return
	}
	if !w.streaming {
		cl := w.prepareHead(true)
		data := w.buf
		if x.vreq.IsHead() || !w.bodyAllowed() {
			data = nil
		}
		err := x.c.Loop().Post(func() {
			if x.c.Closed() || x.cs.std != x {
				x.done(true)
				return
			}
			x.writeHead(w.resp, cl)
			if len(data) > 0 {
				x.c.Write(data)
			}
			x.done(w.resp.ShouldClose() || (w.cl >= 0 && int64(len(data)) < w.cl && !x.vreq.IsHead()))
		})
		if err != nil {
			x.cancel()
		}
		return
	}
	if err := w.send(true); err != nil {
		x.postDone(true)
		return
	}
	short := w.cl >= 0 && w.written < w.cl && !x.vreq.IsHead()
	chunked, mustClose := w.chunked, w.mustClose || short
	err := x.c.Loop().Post(func() {
		if chunked && !x.c.Closed() {
			x.c.Write(AppendLastChunk(x.cs.ls.scratch[:0]))
		}
		x.done(mustClose)
	})
	if err != nil {
		x.cancel()
	}
}

// postDone ends the exchange without a (further) response.
func (x *stdExchange) postDone(mustClose bool) {
	if err := x.c.Loop().Post(func() { x.done(mustClose) }); err != nil {
		x.cancel()
	}
}

// panicked answers a handler's panic: 500 if nothing was sent yet, then
// the connection closes. A panic with net/http.ErrAbortHandler (abort)
// only closes it, as net/http does.
func (w *stdWriter) panicked(abort bool) {
	x := w.x
	sent := w.streaming
	err := x.c.Loop().Post(func() {
		if x.cs.std == x && !x.c.Closed() && !abort {
			x.cs.ls.st.panics.Add(1)
			if !sent {
				ls := x.cs.ls
				ls.scratch = AppendError(ls.scratch[:0], StatusInternalServerError, x.cs.date())
				x.c.Write(ls.scratch)
			}
		}
		x.done(true)
	})
	if err != nil {
		x.cancel()
	}
}

// signalDrained sends nil on errc once c's pending output is down to
// stdOutHigh, or net.ErrClosed if c closes first: a streaming writer off
// the loop waits on it before producing more.
func signalDrained(c *vnet.Conn, errc chan<- error) {
	c.OnDrain(stdOutHigh, func() {
		if c.Closed() {
			errc <- net.ErrClosed
			return
		}
		errc <- nil
	})
}
