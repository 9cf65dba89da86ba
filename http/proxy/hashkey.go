package proxy

import vhttp "github.com/veloq/veloq/http"

// A HashKey says what part of a request the Hash policy hashes.
type HashKey struct {
	kind keyKind
	name string
}

type keyKind uint8

const (
	keyNone keyKind = iota
	keyHeader
	keyCookie
	keyPath
)

// HeaderKey hashes the value of the request field name.
func HeaderKey(name string) HashKey { return HashKey{keyHeader, name} }

// CookieKey hashes the value of the cookie name.
func CookieKey(name string) HashKey { return HashKey{keyCookie, name} }

// PathKey hashes the request path.
func PathKey() HashKey { return HashKey{kind: keyPath} }

// key returns the request's key, or nil when it has none (the request
// then goes round-robin).
func (k HashKey) key(r *vhttp.Request) []byte {
	switch k.kind {
	case keyHeader:
		return r.Header(k.name)
	case keyPath:
		return r.Path
	case keyCookie:
		for i := range r.Headers {
			if foldEq(r.Headers[i].Name, "cookie") {
				if v := cookie(r.Headers[i].Value, k.name); v != nil {
					return v
				}
			}
		}
	}
	return nil
}

// cookie returns the value of the cookie name in a Cookie field value
// ("a=1; b=2"), or nil.
func cookie(v []byte, name string) []byte {
	for len(v) > 0 {
		i := 0
		for i < len(v) && v[i] != ';' {
			i++
		}
		pair := v[:i]
		if i < len(v) {
			v = v[i+1:]
		} else {
			v = nil
		}
		for len(pair) > 0 && pair[0] == ' ' {
			pair = pair[1:]
		}
		if len(pair) > len(name) && pair[len(name)] == '=' && string(pair[:len(name)]) == name {
			return pair[len(name)+1:]
		}
	}
	return nil
}
