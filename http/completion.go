package http

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/veloq/veloq/http/internal/h1"
	vnet "github.com/veloq/veloq/net"
)

// A Completion describes one request whose exchange ended, as the server
// saw it on the wire: what [WithCompletion]'s hook receives. It is the
// same for every handler style (inline, [Offloaded], [OffloadedBlocking],
// [FromStd]) and protocol, and covers answers the server gave itself:
// 500 after a panic, 503 over a budget or a refused pool, 408 for a body
// that stopped, 400 for a request the parser rejected.
type Completion struct {
	// Method and Target are the request's method and raw target ("" when
	// the request was rejected before they were known). Route is the
	// [Router] pattern that matched ("GET /users/{id}"), "" when no Router
	// matched or the handler ran under FromStd at the root.
	Method, Target, Route string
	// Proto is "HTTP/1.1", "HTTP/1.0" or "HTTP/2".
	Proto string
	// RemoteAddr is the client's address.
	RemoteAddr net.Addr
	// Status is the status of the answer sent (or started), 0 when none
	// was.
	Status int
	// BytesIn is what the request took on the wire: for HTTP/1 its head
	// and body as received (chunk framing included), for HTTP/2 its
	// HEADERS, CONTINUATION and DATA frames (frame headers included).
	// BytesOut is the answer as written, framing included (an interim
	// 100 Continue too).
	BytesIn, BytesOut int64
	// Duration runs from the request's head arriving (the loop reading
	// its last byte) to its answer ending, on the loop's clock (refreshed
	// once per loop iteration, so it is exact to an iteration).
	Duration time.Duration
	// Completed reports whether the answer went out whole: false when it
	// was cut (a panic or an error after the head went out, a stream
	// reset, the client gone, net/http.ErrAbortHandler), or none was sent.
	Completed bool
}

// WithCompletion makes the server call f on the connection's loop once
// for every request, when its exchange ends (see [Completion]): the
// place for access logs ([AccessLog]) and metrics. f runs on the loop, so
// it must be quick and must not block; the *Completion is reused for the
// next request, so f must not keep it (its strings may be kept). A panic
// in f is recovered and logged. With no hook the server does no
// bookkeeping for it (no clock reading, no allocation). Combine several
// hooks with [ChainCompletion].
func WithCompletion(f func(*Completion)) Option {
	return func(o *serverOptions) { o.completion = f }
}

// ChainCompletion returns a hook that calls each non-nil hook of fs in
// order, for WithCompletion with an access log and metrics at once.
func ChainCompletion(fs ...func(*Completion)) func(*Completion) {
	var hooks []func(*Completion)
	for _, f := range fs {
		if f != nil {
			hooks = append(hooks, f)
		}
	}
	return func(c *Completion) {
		for _, f := range hooks {
			f(c)
		}
	}
}

// An exchangeRecord is what the completion hook will be told about the
// request in progress on an exchange. Only begin, when a hook is set,
// starts one; the byte and status fields are kept up to date regardless,
// as single adds and stores cost no more than the test that would skip
// them. Without a hook the whole costs 13 instructions a request
// (callgrind, BenchmarkServerFastPath/epoll/depth=16: the http package's
// own 2,507 became 2,520). route is the fast handler's Router pattern:
// taken from the connection when an HTTP/1 request is reported (no other
// handler runs on it meanwhile), and after the handler for a stream.
type exchangeRecord struct {
	pending bool  // begun and not yet reported
	start   int64 // loop clock when the head arrived
	method  string
	target  string
	route   string
	proto   string
	status  int
	in, out int64
}

// begin starts the record of req (nil: a request rejected before it was
// parsed), whose head took in bytes, at the loop clock now.
func (r *exchangeRecord) begin(req *Request, in, now int64) {
	*r = exchangeRecord{pending: true, start: now, in: in, proto: "HTTP/1.1", status: noStatus}
	if req == nil {
		return
	}
	r.method = methodString(req.Method)
	r.target = string(req.Target)
	switch {
	case req.ProtoMajor == 2:
		r.proto = "HTTP/2"
	case req.ProtoMinor == 0:
		r.proto = "HTTP/1.0"
	}
}

// noStatus is a record's status until an answer starts.
const noStatus = -1

// methodString is m as a string, with no allocation for the methods of
// RFC 9110 and PATCH.
func methodString(m []byte) string {
	if s := h1.MethodString(m); s != "" {
		return s
	}
	return string(m)
}

// complete reports the record's request to the completion hook, once.
func (s *Server) complete(ls *loopState, r *exchangeRecord, c *vnet.Conn, completed bool) {
	if !r.pending {
		return
	}
	r.pending = false
	switch r.status {
	case noStatus:
		r.status = 0
	case 0:
		// writeResponse and writeHead store the Response's status as
		// it is, 0 for a handler that set none: 200.
		r.status = StatusOK
	}
	d := &ls.done
	*d = Completion{
		Method: r.method, Target: r.target, Route: r.route, Proto: r.proto,
		RemoteAddr: c.RemoteAddr(),
		Status:     r.status,
		BytesIn:    r.in, BytesOut: r.out,
		Duration:  time.Duration(c.Loop().Clock() - r.start),
		Completed: completed,
	}
	s.callCompletion(d)
	*d = Completion{}
}

// callCompletion runs the hook, which must not take the loop down.
func (s *Server) callCompletion(d *Completion) {
	defer func() {
		if p := recover(); p != nil {
			s.opts.logger.Error("http: completion hook panicked", "panic", p, "remote", d.RemoteAddr)
		}
	}()
	s.opts.completion(d)
}

// AccessLog returns a completion hook (for [WithCompletion]) that logs
// every request to l as one record, message "http request", with the
// attributes method, route, target, proto, status, bytes_in, bytes_out,
// duration, remote and completed. Answers below 500 that went out whole
// log at Info; 5xx answers and answers cut short (completed=false) at
// Warn, since they are the server's failures while a 4xx is the client's.
// Nothing is formatted when l has neither level enabled. The record is
// formatted on the loop: slog's JSON handler takes about 18,000
// instructions a record (callgrind), six times what an inline request
// costs the server, so at high rates give it a cheap or sampling handler.
func AccessLog(l *slog.Logger) func(*Completion) {
	return func(c *Completion) {
		level := slog.LevelInfo
		if c.Status >= 500 || !c.Completed {
			level = slog.LevelWarn
		}
		ctx := context.Background()
		if !l.Enabled(ctx, level) {
			return
		}
		remote := ""
		if c.RemoteAddr != nil {
			remote = c.RemoteAddr.String()
		}
		l.LogAttrs(ctx, level, "http request",
			slog.String("method", c.Method),
			slog.String("route", c.Route),
			slog.String("target", c.Target),
			slog.String("proto", c.Proto),
			slog.Int("status", c.Status),
			slog.Int64("bytes_in", c.BytesIn),
			slog.Int64("bytes_out", c.BytesOut),
			slog.Duration("duration", c.Duration),
			slog.String("remote", remote),
			slog.Bool("completed", c.Completed),
		)
	}
}
