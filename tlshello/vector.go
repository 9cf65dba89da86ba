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

// take returns the next n bytes, named what in errors.
func (v *vector) take(n int, what string) ([]byte, error) {
	if n > v.left {
		return nil, v.malformed("%s takes %d bytes, only %d left", what, n, v.left)
	}
	if n > len(v.b) {
		return nil, ErrNeedMore
	}
	p := v.b[:n:n]
	v.b = v.b[n:]
	v.left -= n
	return p, nil
}

// uint reads an n-byte big-endian unsigned integer (n is at most 3).
func (v *vector) uint(n int, what string) (int, error) {
	p, err := v.take(n, what)
	if err != nil {
		return 0, err
	}
	x := 0
	for _, c := range p {
		x = x<<8 | int(c)
	}
	return x, nil
}

// sub reads a vector whose length is the next prefix bytes and must lie in
// [lo, hi]. The returned vector holds what of it is in hand; v moves past
// all of its declared bytes, so if they are not all in hand, v's next read
// needs more input.
func (v *vector) sub(prefix, lo, hi int, name string) (vector, error) {
	if prefix > v.left {
		// The message take would give, made here so that no name is
		// built on the way to success.
		return vector{}, v.malformed("%s length takes %d bytes, only %d left", name, prefix, v.left)
	}
	n, err := v.uint(prefix, "")
	if err != nil {
		return vector{}, err
	}
	if n < lo || n > hi {
		return vector{}, v.malformed("%s length %d outside %d..%d", name, n, lo, hi)
	}
	if n > v.left {
		return vector{}, v.malformed("%s length %d overruns the %d bytes left", name, n, v.left)
	}
	in := min(n, len(v.b))
	s := vector{b: v.b[:in:in], left: n, name: name}
	v.b = v.b[in:]
	v.left -= n
	return s, nil
}

// end returns an error if declared bytes are left unread.
func (v *vector) end() error {
	if v.left != 0 {
		return v.malformed("bytes left over after the last field (%d)", v.left)
	}
	return nil
}
