package http

import (
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/veloq/veloq/executor"
	vnet "github.com/veloq/veloq/net"
)

// Default server settings.
const (
	DefaultReadHeaderTimeout  = 10 * time.Second
	DefaultNextRequestTimeout = 60 * time.Second
	// DefaultReadBodyTimeout is the longest a request body may pause, as
	// nginx's client_body_timeout.
	DefaultReadBodyTimeout = 60 * time.Second
	// DefaultMinBodyRate and DefaultBodyRateGrace are the minimum body
	// rate's defaults, Apache mod_reqtimeout's (body=20,MinRate=500): a
	// body is due 20 s after the server starts waiting for it, plus one
	// second per 500 bytes received.
	DefaultMinBodyRate   = 500
	DefaultBodyRateGrace = 20 * time.Second
	// DefaultMaxBufferedBodyBytes bounds the request bodies all the
	// connections of a server hold while collecting them for fast
	// handlers.
	DefaultMaxBufferedBodyBytes = 64 << 20
	// DefaultLingerTimeout bounds how long a connection closed after an
	// error keeps draining the peer's input, so the error response is not
	// destroyed by a reset.
	DefaultLingerTimeout = 500 * time.Millisecond
)

type serverOptions struct {
	limits            Limits
	readHeaderTimeout time.Duration
	readBodyTimeout   time.Duration
	minBodyRate       int64 // bytes per second; 0: off
	bodyRateGrace     time.Duration
	maxBufferedBody   int64
	idleTimeout       time.Duration
	writeTimeout      time.Duration
	lingerTimeout     time.Duration
	maxConns          int
	reject503         bool
	offload           *executor.Pool
	filePool          *executor.BlockingPool // ServeFile's (fs.go)
	logger            *slog.Logger
	net               []vnet.Option
	tls               *tls.Config // cloned; NextProtos set in setDefaults
	noHTTP2           bool
	h2c               bool // HTTP/2 with prior knowledge is served
	completion        func(*Completion)
}

// Option configures a [Server].
type Option func(*serverOptions)

// WithRequestLimits sets the limits on a request (head size, target size,
// number of fields, collected body size). Zero fields mean the defaults.
func WithRequestLimits(l Limits) Option { return func(o *serverOptions) { o.limits = l } }

// WithReadHeaderTimeout bounds the time from a request's first byte to the
// end of its head (default 10s); a client slower than that (slowloris) is
// disconnected. A negative d disables it.
func WithReadHeaderTimeout(d time.Duration) Option {
	return func(o *serverOptions) { o.readHeaderTimeout = d }
}

// WithReadBodyTimeout closes a request whose body stops arriving: when
// the server waits for body bytes and none come for d (default 60s), a
// fast handler's request is answered with 408 Request Timeout and a
// FromStd handler's Body.Read fails with [ErrBodyReadTimeout]; either way
// the connection closes. The clock restarts whenever bytes arrive, and
// does not run while a FromStd handler is slow to read. A negative d
// disables it.
func WithReadBodyTimeout(d time.Duration) Option {
	return func(o *serverOptions) { o.readBodyTimeout = d }
}

// WithMinBodyRate ends a request whose body arrives slower than
// bytesPerSecond on average, as Apache's mod_reqtimeout MinRate: the body
// is due grace after the server starts waiting for it, plus one second for
// every bytesPerSecond bytes received (default 500 B/s after 20 s). It
// catches what the read-body timeout cannot: a body trickled a byte at a
// time, each byte restarting that timeout. The request ends as for the
// read-body timeout (408, or [ErrBodyReadTimeout] for a FromStd handler),
// and like it the clock runs only while the server waits for the client.
// A negative bytesPerSecond disables it; grace <= 0 keeps the default.
func WithMinBodyRate(bytesPerSecond int64, grace time.Duration) Option {
	return func(o *serverOptions) { o.minBodyRate, o.bodyRateGrace = bytesPerSecond, grace }
}

// WithMaxBufferedBodyBytes bounds the memory all connections together may
// hold for request bodies being collected for fast handlers (default
// 64 MiB). Each body buffer grows as its bytes arrive, never reserving the
// announced Content-Length up front; a request that would take the total
// past n is answered with 503 Service Unavailable and its connection
// closed. FromStd bodies stream through a small per-connection pipe and
// are not counted.
func WithMaxBufferedBodyBytes(n int64) Option {
	return func(o *serverOptions) { o.maxBufferedBody = n }
}

// WithNextRequestTimeout closes a keep-alive connection that has been
// waiting for its next request for d (default 60s, net/http's
// IdleTimeout). A negative d disables it.
func WithNextRequestTimeout(d time.Duration) Option {
	return func(o *serverOptions) { o.idleTimeout = d }
}

// WithWriteTimeout closes a connection whose pending output makes no
// progress for d: a peer that stopped reading. Default off.
func WithWriteTimeout(d time.Duration) Option { return func(o *serverOptions) { o.writeTimeout = d } }

// WithMaxConns limits the open connections of the server to n (default 0:
// no limit). A connection above the limit is answered with
// 503 Service Unavailable and closed when reply503 is set, and closed at
// once otherwise.
func WithMaxConns(n int, reply503 bool) Option {
	return func(o *serverOptions) { o.maxConns, o.reject503 = n, reply503 }
}

// WithOffload runs the server's handler on the stealable pool p instead of
// inline on the loop, like wrapping it with [Offloaded]. Responses on a
// connection stay in request order.
func WithOffload(p *executor.Pool) Option { return func(o *serverOptions) { o.offload = p } }

// WithLogger sets the logger of the server and of its loops. Default
// slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *serverOptions) {
		o.logger = l
		o.net = append(o.net, vnet.WithLogger(l))
	}
}

// WithTLS serves HTTPS: every connection is TLS with cfg (see
// [vnet.WithTLS]: the handshake never makes the loop wait for the peer,
// records are encrypted and decrypted on the loop, and handlers are
// unchanged; [vnet.WithTLSHandshakeOffLoop] goes in WithNetOptions).
// When cfg.NextProtos is empty, ALPN offers "h2" and "http/1.1"
// ("http/1.1" alone with WithHTTP2(false)). FromStd handlers see [net/http.Request.TLS]; fast
// ones reach the state through ResponseWriter.Conn().TLS(). cfg is
// cloned.
func WithTLS(cfg *tls.Config) Option {
	if cfg != nil {
		cfg = cfg.Clone()
	}
	return func(o *serverOptions) { o.tls = cfg }
}

// WithHTTP2 turns HTTP/2 on or off (default on). On, the server speaks
// HTTP/2 to a client that negotiates "h2" by ALPN over TLS and to one that
// opens a plaintext connection with HTTP/2's preface (h2c with prior
// knowledge, as curl --http2-prior-knowledge and gRPC clients do); every
// other connection is HTTP/1.1. Handlers are the same for both: each
// HTTP/2 stream is an exchange like an HTTP/1 request (Hijack excepted).
// Since a connection may open with HTTP/2's preface, a first line that
// ends in no HTTP-version ("HTTP/", a digit, "." and a digit) and is no HTTP/1 request
// line at all (no standard method, no "HTTP/" word, as h2spec's "INVALID
// CONNECTION PREFACE") is closed without an answer while HTTP/2 is on;
// any other bad line, and every one with HTTP/2 off, gets 400 Bad Request.
func WithHTTP2(on bool) Option { return func(o *serverOptions) { o.noHTTP2 = !on } }

// WithNetOptions passes options through to the TCP server underneath:
// the number of loops ([vnet.WithLoops]), the backend
// ([vnet.WithBackend]), pinning, balancing, buffer sizes, where TLS
// handshakes run ([vnet.WithTLSHandshakeOffLoop]):
//
//	s, err := vhttp.NewServer(h, vhttp.WithNetOptions(vnet.WithLoops(4), vnet.WithBackend(vnet.BackendEpoll)))
//
// There is one way to set each: an option of this package exists only
// where the HTTP server itself acts on the setting. [WithTLS] is one (the
// server sets ALPN's "h2" and "http/1.1" by [WithHTTP2]), so TLS is not
// passed here as vnet.WithTLS, whose ALPN would offer no HTTP/2;
// [WithLogger] is another (the server's own logs). Every option of the engine alone,
// the loops and the backend among them, goes through WithNetOptions, so
// no setting has two names. Options apply in order: a later one wins.
func WithNetOptions(opts ...vnet.Option) Option {
	return func(o *serverOptions) { o.net = append(o.net, opts...) }
}

func (o *serverOptions) setDefaults() {
	if o.filePool == nil {
		o.filePool = executor.NewBlockingPool() // no goroutine until a file is served
	}
	if o.readHeaderTimeout == 0 {
		o.readHeaderTimeout = DefaultReadHeaderTimeout
	}
	if o.readBodyTimeout == 0 {
		o.readBodyTimeout = DefaultReadBodyTimeout
	}
	switch {
	case o.minBodyRate == 0:
		o.minBodyRate = DefaultMinBodyRate
	case o.minBodyRate < 0:
		o.minBodyRate = 0
	}
	if o.bodyRateGrace <= 0 {
		o.bodyRateGrace = DefaultBodyRateGrace
	}
	if o.maxBufferedBody <= 0 {
		o.maxBufferedBody = DefaultMaxBufferedBodyBytes
	}
	if o.idleTimeout == 0 {
		o.idleTimeout = DefaultNextRequestTimeout
	}
	if o.lingerTimeout <= 0 {
		o.lingerTimeout = DefaultLingerTimeout
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	o.h2c = !o.noHTTP2
	if o.tls != nil && len(o.tls.NextProtos) == 0 {
		o.tls.NextProtos = []string{"h2", "http/1.1"}
		if o.noHTTP2 {
			o.tls.NextProtos = []string{"http/1.1"}
		}
	}
	if o.tls != nil {
		o.net = append(o.net, vnet.WithTLS(o.tls))
	}
	o.limits = Limits{
		MaxHeaderBytes: o.limits.maxHeaderBytes(),
		MaxTargetBytes: o.limits.maxTargetBytes(),
		MaxHeaders:     o.limits.maxHeaders(),
		MaxBodyBytes:   o.limits.maxBodyBytes(),
	}
}
