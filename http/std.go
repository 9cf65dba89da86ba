package http

import (
	"bytes"
	"context"
	"io"
	"math"
	nethttp "net/http"

	"github.com/veloq/veloq/executor"
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
// call) costs a goroutine and never holds a loop or a pool worker. (The
// goroutine is one that ran an earlier request if one is idle, as
// net/http's goroutine per connection runs its requests in turn.) It gets
// net/http semantics:
//
//   - a real *net/http.Request: method, URL, protocol, header, Host,
//     RemoteAddr, ContentLength, TransferEncoding, and a Body that streams
//     the request body as it arrives (when the handler does not keep up,
//     the loop stops reading from the client), and Trailer: the names
//     the request's Trailer field announced, with their values once Body
//     returned io.EOF (a chunked HTTP/1.1 body's or HTTP/2's);
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
// The options choose where the handler runs ([WithStdBlockingPool] bounds
// the goroutines, [WithStdPool] runs CPU-bound handlers that never block on
// the stealable pool) and bound the streamed body ([WithStdMaxBodyBytes]). A
// nil option is ignored, so FromStd(h, nil) is the default.
//
// Below the root, called on the loop by a fast handler chain (e.g. a
// middleware that wraps it), it runs off the loop all the same, once the
// chain returns: the body has then been collected under the server's
// [Limits] (without its trailers), the fields the chain set on its
// ResponseWriter start the response, and what the chain writes after
// calling it is dropped. Under
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

// A StdOption configures a [FromStd] handler. Its options are the
// WithStd... functions; it is a type of its own, not an [Option], so that
// a FromStd option cannot be passed to [NewServer] by mistake, nor a
// Server's option to FromStd (as executor.BlockingOption is apart from
// executor.Option).
type StdOption func(*stdConfig)

type stdConfig struct {
	pool     *executor.Pool
	blocking *executor.BlockingPool
	maxBody  int64 // <= 0: unlimited
}

// WithStdMaxBodyBytes bounds a FromStd handler's request body, which streams
// to the handler through a small buffer rather than being collected: a
// larger Content-Length, or a chunked body that grows past n, is answered
// with 413 Content Too Large. n <= 0 means no limit, which is the default,
// as in net/http (whose handlers bound bodies with http.MaxBytesReader).
// The server's [Limits.MaxBodyBytes] does not apply to streamed bodies.
func WithStdMaxBodyBytes(n int64) StdOption {
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

// WithStdPool runs the handler on the stealable pool p instead of on a
// goroutine of its own. Only for CPU-bound handlers that never block: a
// handler waiting on its request body, a lock or the network holds one of
// p's few workers meanwhile, and a handful of slow clients can then stall
// every request. A nil p means the default.
func WithStdPool(p *executor.Pool) StdOption {
	return func(c *stdConfig) { c.pool, c.blocking = p, nil }
}

// WithStdBlockingPool runs the handler on b, whose goroutines are bounded
// and reused: blocking is fine there. When b is saturated (all its
// goroutines busy and its queue full) the request is answered with
// 503 Service Unavailable. A nil b means the default.
func WithStdBlockingPool(b *executor.BlockingPool) StdOption {
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
		return sh.cfg.blocking.Spawn(x.run)
	}
	x.ex.shared().std.run(x)
	return nil
}

// ServeHTTP serves a request that reached sh through another handler.
// On the loop, it arranges for the server to run sh as it runs a root
// FromStd handler once the chain returns (see FromStd). Elsewhere (under
// Offloaded, already off the loop) it runs h here with a buffered writer.
func (sh *stdHandler) ServeHTTP(w *ResponseWriter, r *Request) {
	if w.ex != nil && !w.off {
		w.then = then{step: stepStd, std: sh}
		return
	}
	var raddr string
	if w.ex != nil || w.raddr != nil {
		raddr = w.RemoteAddr().String()
	}
	sreq, err := stdRequest(context.Background(), r, raddr, nil, nil)
	if err != nil {
		w.WriteHeader(StatusBadRequest)
		return
	}
	if w.ex != nil {
		sreq.TLS = w.ex.transport().TLS()
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
