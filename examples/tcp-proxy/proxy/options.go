package proxy

import (
	"fmt"
	"log/slog"
	"time"
)

// SpliceMode says when forwarding switches from copying to splice(2).
type SpliceMode int

const (
	// SpliceOff copies every byte through the loop's buffers. The default.
	SpliceOff SpliceMode = iota
	// SpliceLarge splices a direction once one read from it delivers at
	// least the splice threshold (WithSpliceThreshold): bulk transfers go
	// through the kernel, small messages stay on the batched copy path.
	SpliceLarge
	// SpliceAlways splices both directions from the moment the backend
	// connects.
	SpliceAlways
)

// String returns the name ParseSpliceMode accepts.
func (m SpliceMode) String() string {
	switch m {
	case SpliceOff:
		return "off"
	case SpliceLarge:
		return "large"
	case SpliceAlways:
		return "always"
	}
	return fmt.Sprintf("SpliceMode(%d)", int(m))
}

// ParseSpliceMode reads "off", "large" or "always".
func ParseSpliceMode(s string) (SpliceMode, error) {
	for _, m := range []SpliceMode{SpliceOff, SpliceLarge, SpliceAlways} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("proxy: splice mode must be off, large or always, not %q", s)
}

type options struct {
	dialTimeout     time.Duration
	cooldown        time.Duration
	limit           int
	splice          SpliceMode
	spliceThreshold int
	logger          *slog.Logger
	sni             bool
	routes          []Route
	helloTimeout    time.Duration
}

func defaultOptions() options {
	return options{
		dialTimeout:     5 * time.Second,
		cooldown:        2 * time.Second,
		limit:           256 << 10,
		spliceThreshold: 16 << 10,
		helloTimeout:    5 * time.Second,
	}
}

// Option configures a Proxy.
type Option func(*options)

// WithDialTimeout bounds each backend connect. Default 5 s.
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.dialTimeout = d } }

// WithCooldown sets how long a backend whose connect failed is skipped
// while another backend is available. Default 2 s.
func WithCooldown(d time.Duration) Option { return func(o *options) { o.cooldown = d } }

// WithBufferLimit bounds the bytes queued toward one side of a pair:
// reading from the other side pauses above it and resumes when half of it
// has been sent. The proxy turns the loops' own write water marks off on
// both sides of a pair (their pause would stop the wrong side), so this is
// the bound. Default 256 KiB.
func WithBufferLimit(n int) Option { return func(o *options) { o.limit = n } }

// WithSplice chooses when forwarding uses splice(2). Default SpliceOff.
func WithSplice(m SpliceMode) Option { return func(o *options) { o.splice = m } }

// WithSpliceThreshold sets the read size that switches a direction to
// splicing under SpliceLarge. Default 16 KiB (one full io_uring receive
// buffer).
func WithSpliceThreshold(n int) Option { return func(o *options) { o.spliceThreshold = n } }

// WithSNI passes TLS through to backends chosen by the server name of the
// client's ClientHello (SNI), without terminating it, as HAProxy's
// req.ssl_sni and nginx's ssl_preread do. The proxy reads a new client's
// first bytes before it dials, parses them with package tlshello, picks
// the route whose Name matches (New's backends are the default route, for
// names without a match and hellos without one; with none, such clients
// are closed), and forwards every byte, the hello included, unchanged.
// Clients whose first bytes are not a TLS ClientHello, or a malformed or
// oversized one (over tlshello.MaxLen, 17 KiB), or one not complete
// within the hello timeout, are closed and counted in Stats.
//
// The listener must be plaintext (not vnet.WithTLS): the proxy routes the
// ciphertext. WithSNI with no routes sends every TLS client to the default
// backends and closes everything else.
func WithSNI(routes ...Route) Option {
	return func(o *options) {
		o.sni = true
		o.routes = append(o.routes, routes...)
	}
}

// WithHelloTimeout bounds the wait for a client's complete ClientHello,
// from its accept, under WithSNI. Default 5 s.
func WithHelloTimeout(d time.Duration) Option { return func(o *options) { o.helloTimeout = d } }

// WithLogger sets the logger. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

func (o *options) validate() error {
	switch {
	case o.dialTimeout <= 0:
		return fmt.Errorf("proxy: dial timeout must be positive, got %v", o.dialTimeout)
	case o.cooldown < 0:
		return fmt.Errorf("proxy: cooldown must not be negative, got %v", o.cooldown)
	case o.limit < 1024:
		return fmt.Errorf("proxy: buffer limit must be at least 1024 bytes, got %d", o.limit)
	case o.splice < SpliceOff || o.splice > SpliceAlways:
		return fmt.Errorf("proxy: unknown splice mode %d", int(o.splice))
	case o.spliceThreshold < 1:
		return fmt.Errorf("proxy: splice threshold must be positive, got %d", o.spliceThreshold)
	case o.helloTimeout <= 0:
		return fmt.Errorf("proxy: hello timeout must be positive, got %v", o.helloTimeout)
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	return nil
}
