package websocket

import (
	"log/slog"
	"time"

	vhttp "github.com/veloq/veloq/http"
)

// An Option configures an [Upgrader].
type Option func(*config)

// config is the settings every connection of an Upgrader shares; it is
// immutable once NewUpgrader returns.
type config struct {
	checkOrigin      func(r *vhttp.Request) bool
	subprotocols     []string
	compression      bool
	compressMin      int
	maxFrame         int64
	maxMessage       int64
	pingInterval     time.Duration
	pongTimeout      time.Duration
	closeTimeout     time.Duration
	maxPendingOutput int
	logger           *slog.Logger
}

func defaultConfig() config {
	return config{
		compressMin:      128,
		maxFrame:         1 << 20,
		maxMessage:       4 << 20,
		closeTimeout:     5 * time.Second,
		maxPendingOutput: 4 << 20,
		logger:           slog.Default(),
	}
}

// WithCheckOrigin sets the function that decides whether a request's
// Origin is allowed; a refused request gets 403 Forbidden. The default
// accepts requests without an Origin header (non-browser clients) and
// requests whose Origin's host equals the Host header, case-insensitively:
// a browser page from another site cannot open a connection with the
// user's cookies (RFC 6455 §10.2).
func WithCheckOrigin(f func(r *vhttp.Request) bool) Option {
	return func(c *config) { c.checkOrigin = f }
}

// WithSubprotocols lists the subprotocols the server speaks, in order of
// preference. The first one the client also offers in
// Sec-WebSocket-Protocol is selected ([Conn.Subprotocol]); when none
// matches, the connection opens without a subprotocol, and the client
// decides whether that is acceptable.
func WithSubprotocols(protocols ...string) Option {
	return func(c *config) { c.subprotocols = append([]string(nil), protocols...) }
}

// WithCompression turns permessage-deflate (RFC 7692) on: it is
// negotiated when the client offers it. Off by default. Each message is
// compressed on its own (the response asks for no context takeover in
// both directions), so an idle connection holds no compressor state.
// Messages shorter than minSize bytes are sent uncompressed (0 means 128).
func WithCompression(on bool, minSize int) Option {
	return func(c *config) {
		c.compression = on
		if minSize > 0 {
			c.compressMin = minSize
		}
	}
}

// WithMessageLimits bounds a data frame's payload and a whole message
// (after inflating, for compressed messages), in bytes. A peer that goes
// over is failed with close code 1009. Defaults 1 MiB and 4 MiB; values
// <= 0 keep the default.
func WithMessageLimits(maxFrame, maxMessage int64) Option {
	return func(c *config) {
		if maxFrame > 0 {
			c.maxFrame = maxFrame
		}
		if maxMessage > 0 {
			c.maxMessage = maxMessage
		}
	}
}

// WithPing sends a ping every interval and closes the connection (with
// [ErrPongTimeout]) when no pong arrives within pongTimeout of a ping.
// Off by default (interval 0); pongTimeout <= 0 means interval.
func WithPing(interval, pongTimeout time.Duration) Option {
	return func(c *config) {
		c.pingInterval = interval
		if pongTimeout <= 0 {
			pongTimeout = interval
		}
		c.pongTimeout = pongTimeout
	}
}

// WithCloseHandshakeTimeout bounds how long a connection waits for the
// peer's close frame after sending its own, before closing the TCP
// connection anyway; and, once the close frames went (or the peer was
// failed), how long the half-closed connection waits for the peer's FIN
// before closing. Default 5s.
func WithCloseHandshakeTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.closeTimeout = d
		}
	}
}

// WithMaxPendingOutput bounds the bytes written to a connection and not
// yet sent. A message that would go over it is not written and the write
// returns [ErrOutputFull]: a peer that stops reading cannot make the
// server buffer without bound (broadcasts skip it). Default 4 MiB.
// On Windows a write counts as pending until its completion reaches the
// loop, which can be after the peer has read it: leave room for one
// message in flight above what a reader that keeps up needs.
func WithMaxPendingOutput(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxPendingOutput = n
		}
	}
}

// WithLogger sets the logger for refused handshakes and failed
// connections (at debug level: they are the peers' doing, not the
// server's). Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}
