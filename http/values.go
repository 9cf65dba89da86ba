package http

import (
	"bytes"
	"errors"

	"github.com/veloq/veloq/http/internal/h1"
)

// ErrBadEscape is returned by [AppendUnescaped] for a '%' not followed by
// two hexadecimal digits.
var ErrBadEscape = errors.New("http: malformed percent-escape")

// QueryValue returns the raw (still percent-encoded) value of the first
// query parameter called name, and whether there is one: "a=1&b&c=" gives
// "1" for a, an empty value for b and c, and nil, false for d. Names are
// compared as sent. Decode a value with [AppendUnescaped]. It allocates
// nothing.
func (r *Request) QueryValue(name string) ([]byte, bool) {
	return lookupPair(r.Query, name, '&')
}

// FormValue returns the raw value of the first form field called name:
// from an application/x-www-form-urlencoded request body first, then from
// the query, like net/http's FormValue (before decoding). It allocates
// nothing.
func (r *Request) FormValue(name string) ([]byte, bool) {
	if len(r.Body) > 0 && isFormContent(r.Header("Content-Type")) {
		if v, ok := lookupPair(r.Body, name, '&'); ok {
			return v, true
		}
	}
	return r.QueryValue(name)
}

// Cookie returns the value of the first cookie called name in the Cookie
// fields, without the optional double quotes, and whether there is one.
// It allocates nothing.
func (r *Request) Cookie(name string) ([]byte, bool) {
	for i := range r.Headers {
		f := &r.Headers[i]
		if !h1.EqualFold(f.Name, "Cookie") {
			continue
		}
		if v, ok := lookupPair(f.Value, name, ';'); ok {
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v, true
		}
	}
	return nil, false
}

// lookupPair finds name=value among pairs separated by sep (spaces around
// a pair are skipped) and returns the value, capped.
func lookupPair(s []byte, name string, sep byte) ([]byte, bool) {
	for len(s) > 0 {
		var pair []byte
		if i := bytes.IndexByte(s, sep); i >= 0 {
			pair, s = s[:i], s[i+1:]
		} else {
			pair, s = s, nil
		}
		pair = bytes.TrimLeft(pair, " ")
		k, v := pair, pair[len(pair):]
		if i := bytes.IndexByte(pair, '='); i >= 0 {
			k, v = pair[:i], pair[i+1:]
		}
		if string(k) == name {
			return v[:len(v):len(v)], true
		}
	}
	return nil, false
}

func isFormContent(ct []byte) bool {
	const form = "application/x-www-form-urlencoded"
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return h1.EqualFold(bytes.TrimSpace(ct), form)
}

// AppendUnescaped appends raw, a query or form value, decoded to dst:
// "%XX" becomes the byte XX and '+' a space. On a malformed escape it
// returns dst unchanged and [ErrBadEscape].
func AppendUnescaped(dst, raw []byte) ([]byte, error) {
	n := len(dst)
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '+':
			dst = append(dst, ' ')
		case '%':
			if i+2 >= len(raw) || unhex(raw[i+1]) < 0 || unhex(raw[i+2]) < 0 {
				return dst[:n], ErrBadEscape
			}
			dst = append(dst, byte(unhex(raw[i+1])<<4|unhex(raw[i+2])))
			i += 2
		default:
			dst = append(dst, c)
		}
	}
	return dst, nil
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
