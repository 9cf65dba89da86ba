package tlshello

import "fmt"

// A vector reads the fields of a TLS vector (RFC 8446 §3.4) that may so far
// have arrived only in part: its length is declared by its prefix, but
// fewer bytes may be in hand. A read past the declared length is malformed
// whatever is in hand; a read within it but past the bytes in hand needs
// more input. Reads never look beyond the declared length, so a vector
// taken out of another one cannot reach into the fields that follow it.
type vector struct {
	b    []byte // the bytes in hand; len(b) <= left
	left int    // the declared bytes not yet read
	name string // what the vector holds, for error messages; "" for the message
}

// malformed returns an error wrapping ErrMalformed whose message names v.
func (v *vector) malformed(format string, args ...any) error {
	if v.name == "" {
		return malformed(format, args...)
	}
	return malformed("%s: %s", v.name, fmt.Sprintf(format, args...))
}

// malformed returns an error wrapping ErrMalformed with a message made by
// fmt.Sprintf(format, args...).
func malformed(format string, args ...any) error {
	return errorf(ErrMalformed, format, args...)
}

// errorf returns an error wrapping sentinel with a message made by
// fmt.Sprintf(format, args...).
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}

// complete reports whether all of the vector's declared bytes are in hand.
func (v *vector) complete() bool { return len(v.b) == v.left }

// The reads below check only that their bytes are in hand, which also
// makes them declared (len(v.b) <= v.left), and leave the rest to short, so
// their way to success is short and builds no message.

// take returns the next n bytes, named what in errors.
func (v *vector) take(n int, what string) ([]byte, error) {
	if n <= len(v.b) {
		p := v.b[:n:n]
		v.b = v.b[n:]
		v.left -= n
		return p, nil
	}
	return nil, v.short(n, what, "")
}

// u8 and u16 read a one- and a two-byte big-endian integer.
func (v *vector) u8(what string) (int, error) {
	if len(v.b) >= 1 {
		x := int(v.b[0])
		v.b = v.b[1:]
		v.left--
		return x, nil
	}
	return 0, v.short(1, what, "")
}

func (v *vector) u16(what string) (int, error) {
	if len(v.b) >= 2 {
		x := int(v.b[0])<<8 | int(v.b[1])
		v.b = v.b[2:]
		v.left -= 2
		return x, nil
	}
	return 0, v.short(2, what, "")
}

// short returns the error for a read of n bytes that are not all in hand:
// malformed if they are not all declared, ErrNeedMore if they are. The
// read is named what+suffix, so that callers need not join the two on the
// way to success.
func (v *vector) short(n int, what, suffix string) error {
	if n > v.left {
		return v.malformed("%s%s takes %d bytes, only %d left", what, suffix, n, v.left)
	}
	return ErrNeedMore
}

// sub reads into s a vector whose length is the next prefix (1 or 2)
// bytes and must lie in [lo, hi]. s holds what of it is in hand; v moves
// past all of its declared bytes, so if they are not all in hand, v's next
// read needs more input. (Filling s in place rather than returning it keeps
// this, the busiest function of Parse, from copying a vector through
// memory.)
func (v *vector) sub(s *vector, prefix, lo, hi int, name string) error {
	if prefix > len(v.b) {
		return v.short(prefix, name, " length")
	}
	var n int
	if prefix == 1 {
		n = int(v.b[0])
	} else {
		n = int(v.b[0])<<8 | int(v.b[1])
	}
	v.b = v.b[prefix:]
	v.left -= prefix
	if n < lo || n > hi {
		return v.malformed("%s length %d outside %d..%d", name, n, lo, hi)
	}
	if n > v.left {
		return v.malformed("%s length %d overruns the %d bytes left", name, n, v.left)
	}
	in := min(n, len(v.b))
	s.b, s.left, s.name = v.b[:in:in], n, name
	v.b = v.b[in:]
	v.left -= n
	return nil
}

// end returns an error if declared bytes are left unread.
func (v *vector) end() error {
	if v.left != 0 {
		return v.malformed("bytes left over after the last field (%d)", v.left)
	}
	return nil
}
