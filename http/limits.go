package http

import "github.com/veloq/veloq/http/internal/h1"

// Default limits, used for every zero field of [Limits]. The target limit
// follows RFC 9112 §3, which recommends accepting request lines of at
// least 8,000 octets; the head limit leaves room for such a line and the
// fields browsers, proxies and CDNs add; 100 fields is the count common
// servers accept.
const (
	DefaultMaxHeaderBytes = 16 << 10
	DefaultMaxTargetBytes = 8 << 10
	DefaultMaxHeaders     = 100
	DefaultMaxBodyBytes   = 4 << 20
)

// Limits bounds what a peer may send. A zero field means the default.
type Limits struct {
	// MaxHeaderBytes bounds the request head: request-line, field lines
	// and the empty line, CRLFs included (default 8 KiB). It also bounds a
	// chunked body's trailer section (default 16 KiB). Exceeding it is a
	// 431. Values above 1 GiB are treated as 1 GiB.
	MaxHeaderBytes int
	// MaxTargetBytes bounds the request-target (default 8 KiB). Exceeding
	// it is a 414.
	MaxTargetBytes int
	// MaxHeaders bounds the number of field lines in the head, and in a
	// trailer section (default 100). Exceeding it is a 431.
	MaxHeaders int
	// MaxBodyBytes bounds the decoded body, whether framed by
	// Content-Length or chunked (default 4 MiB). Exceeding it is a 413.
	// It applies to bodies the server collects for fast handlers; a
	// FromStd handler's streamed body has its own limit
	// ([WithStdMaxBodyBytes]).
	MaxBodyBytes int64
}

// DefaultLimits returns the limits a zero Limits stands for.
func DefaultLimits() Limits {
	return Limits{
		MaxHeaderBytes: DefaultMaxHeaderBytes,
		MaxTargetBytes: DefaultMaxTargetBytes,
		MaxHeaders:     DefaultMaxHeaders,
		MaxBodyBytes:   DefaultMaxBodyBytes,
	}
}

// The accessors resolve zero fields the protocol core's way: Limits
// converts to h1.Limits, which has the same fields and the same defaults
// (TestLimitsDefaultsMatchCore).

func (l *Limits) maxHeaderBytes() int { return (*h1.Limits)(l).HeaderBytes() }

func (l *Limits) maxTargetBytes() int { return (*h1.Limits)(l).TargetBytes() }

func (l *Limits) maxHeaders() int { return (*h1.Limits)(l).Headers() }

func (l *Limits) maxBodyBytes() int64 { return (*h1.Limits)(l).BodyBytes() }
