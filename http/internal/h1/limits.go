package h1

// Default limits, used for every zero field of [Limits]: package http's
// DefaultMax* constants, which document them (a test there checks that
// they agree).
const (
	DefaultMaxHeaderBytes = 16 << 10
	DefaultMaxTargetBytes = 8 << 10
	DefaultMaxHeaders     = 100
	DefaultMaxBodyBytes   = 4 << 20
)

// Limits bounds what a peer may send. It has the fields of package http's
// Limits, which converts to it, and means the same: a zero field means
// the default.
type Limits struct {
	MaxHeaderBytes int
	MaxTargetBytes int
	MaxHeaders     int
	MaxBodyBytes   int64
}

// HeaderBytes returns the head's limit, which also bounds a trailer
// section.
func (l *Limits) HeaderBytes() int {
	if l.MaxHeaderBytes > 0 {
		// Offsets into the head are stored as int32.
		return min(l.MaxHeaderBytes, 1<<30)
	}
	return DefaultMaxHeaderBytes
}

// TargetBytes returns the request-target's limit.
func (l *Limits) TargetBytes() int {
	if l.MaxTargetBytes > 0 {
		return l.MaxTargetBytes
	}
	return DefaultMaxTargetBytes
}

// Headers returns the limit on field lines in a head or a trailer section.
func (l *Limits) Headers() int {
	if l.MaxHeaders > 0 {
		return l.MaxHeaders
	}
	return DefaultMaxHeaders
}

// BodyBytes returns the decoded body's limit.
func (l *Limits) BodyBytes() int64 {
	if l.MaxBodyBytes > 0 {
		return l.MaxBodyBytes
	}
	return DefaultMaxBodyBytes
}
