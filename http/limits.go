package http

// Default limits, used for every zero field of [Limits].
const (
	DefaultMaxHeaderBytes = 8 << 10
	DefaultMaxTargetBytes = 4 << 10
	DefaultMaxHeaders     = 64
	DefaultMaxBodyBytes   = 4 << 20
)

// Limits bounds what a peer may send. A zero field means the default.
type Limits struct {
	// MaxHeaderBytes bounds the request head: request-line, field lines
	// and the empty line, CRLFs included (default 8 KiB). It also bounds a
	// chunked body's trailer section. Exceeding it is a 431. Values above
	// 1 GiB are treated as 1 GiB.
	MaxHeaderBytes int
	// MaxTargetBytes bounds the request-target (default 4 KiB). Exceeding
	// it is a 414.
	MaxTargetBytes int
	// MaxHeaders bounds the number of field lines in the head, and in a
	// trailer section (default 64). Exceeding it is a 431.
	MaxHeaders int
	// MaxBodyBytes bounds the decoded body, whether framed by
	// Content-Length or chunked (default 4 MiB). Exceeding it is a 413.
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

func (l *Limits) maxHeaderBytes() int {
	if l.MaxHeaderBytes > 0 {
		// Offsets into the head are stored as int32.
		return min(l.MaxHeaderBytes, 1<<30)
	}
	return DefaultMaxHeaderBytes
}

func (l *Limits) maxTargetBytes() int {
	if l.MaxTargetBytes > 0 {
		return l.MaxTargetBytes
	}
	return DefaultMaxTargetBytes
}

func (l *Limits) maxHeaders() int {
	if l.MaxHeaders > 0 {
		return l.MaxHeaders
	}
	return DefaultMaxHeaders
}

func (l *Limits) maxBodyBytes() int64 {
	if l.MaxBodyBytes > 0 {
		return l.MaxBodyBytes
	}
	return DefaultMaxBodyBytes
}
