package http

import (
	"context"
	"errors"
	"fmt"
	nethttp "net/http"
	"net/url"
	"strings"

	"github.com/veloq/veloq/http/internal/h1"
)

// stdRequest builds a net/http request from a parsed head, like
// net/http's server does. scratch, if not nil, is a reusable buffer for
// building the header.
//
// u, if not nil, holds the URL (the exchange's, so it costs no allocation
// of its own).
func stdRequest(ctx context.Context, r *Request, raddr string, scratch *[]byte, u *url.URL) (*nethttp.Request, error) {
	method, _ := internMethod(r.Method)
	h, strs := stdHeader(r.Headers, scratch, r.Target, r.Host)
	// A value here and one copy in WithContext: the only Request on the heap
	// is the one the handler gets.
	sr := nethttp.Request{
		Method:        method,
		RequestURI:    strs[0],
		ProtoMajor:    1,
		ProtoMinor:    r.ProtoMinor,
		Header:        h,
		ContentLength: r.ContentLength,
		Close:         r.Close,
		Body:          nethttp.NoBody,
		RemoteAddr:    raddr,
	}
	switch {
	case r.ProtoMajor == 2:
		sr.Proto, sr.ProtoMajor, sr.ProtoMinor = "HTTP/2.0", 2, 0
	case r.ProtoMinor == 0:
		sr.Proto = "HTTP/1.0"
	default:
		sr.ProtoMinor = 1
		sr.Proto = "HTTP/1.1"
	}
	var err error
	if sr.Method == "CONNECT" && len(r.Target) > 0 && r.Target[0] != '/' {
		sr.URL = &url.URL{Host: sr.RequestURI}
	} else if u != nil && parseOriginForm(sr.RequestURI, u) {
		sr.URL = u
	} else if sr.URL, err = url.ParseRequestURI(sr.RequestURI); err != nil {
		return nil, err
	}
	sr.Host = sr.URL.Host
	if sr.Host == "" {
		sr.Host = strs[1]
	}
	switch {
	case r.Chunked:
		sr.ContentLength = -1
		sr.TransferEncoding = []string{"chunked"}
		sr.Header.Del("Transfer-Encoding")
	case r.ContentLength < 0 && r.streamed:
		sr.ContentLength = -1 // HTTP/2 DATA of no announced length
	case r.ContentLength < 0:
		sr.ContentLength = 0
	}
	if r.Chunked || r.ProtoMajor == 2 {
		// As net/http: the names the Trailer field announces are
		// r.Trailer's keys, their values set when the body has been read
		// to its end (bodyPipe.Read); the field itself leaves the header.
		// A body of HTTP/1 framing other than chunked has no trailers:
		// the field stays, as net/http keeps it.
		if vs, ok := sr.Header["Trailer"]; ok {
			delete(sr.Header, "Trailer")
			if sr.Trailer, err = announcedTrailer(vs, r.ProtoMajor != 2); err != nil {
				return nil, err
			}
		}
	}
	return sr.WithContext(ctx), nil
}

// errBadTrailerKey is the error of a request whose Trailer field
// announces a field that framing needs in the head.
var errBadTrailerKey = errors.New("http: bad trailer key")

// announcedTrailer returns a request's Trailer field values as
// net/http's Request.Trailer starts: each name announced, canonical, with
// no value yet; nil if none. The framing fields (Transfer-Encoding,
// Content-Length, Trailer) cannot be trailers: net/http refuses an
// HTTP/1 request announcing one (strict), and ignores it over HTTP/2.
func announcedTrailer(vs []string, strict bool) (nethttp.Header, error) {
	var t nethttp.Header
	for _, v := range vs {
		for name := range strings.SplitSeq(v, ",") {
			name = nethttp.CanonicalHeaderKey(strings.Trim(name, " \t"))
			switch name {
			case "":
				continue
			case "Transfer-Encoding", "Content-Length", "Trailer":
				if strict {
					return nil, fmt.Errorf("%w: %s", errBadTrailerKey, name)
				}
				continue
			}
			if t == nil {
				t = make(nethttp.Header)
			}
			t[name] = nil
		}
	}
	return t, nil
}

// parseOriginForm sets *u to what url.ParseRequestURI makes of target
// when target is an absolute path, with an optional query, whose path
// has nothing to unescape or that net/url would escape: the usual
// request, for which ParseRequestURI (its checks, unescaping and
// escaping again to decide RawPath, and the URL's allocation) cost 740
// instructions (callgrind). It reports false, leaving the rest to
// ParseRequestURI, for anything else: "*", an absolute URI, a
// percent-escape, a character net/url escapes in a path, a control
// character, or a lone "?" (ForceQuery).
func parseOriginForm(target string, u *url.URL) bool {
	if len(target) == 0 || target[0] != '/' {
		return false
	}
	path, query, hasQuery := strings.Cut(target, "?")
	for i := 0; i < len(path); i++ {
		if !plainPathByte[path[i]] {
			return false
		}
	}
	if hasQuery {
		if query == "" {
			return false
		}
		for i := 0; i < len(query); i++ {
			if c := query[i]; c < ' ' || c == 0x7f {
				return false
			}
		}
	}
	*u = url.URL{Path: path, RawQuery: query}
	return true
}

// plainPathByte holds the bytes net/url leaves as they are in a path
// (shouldEscape(c, encodePath) is false): unreserved characters and the
// sub-delimiters, ':', '@' and '/' that a path may carry unescaped.
var plainPathByte = func() (t [256]bool) {
	for _, c := range []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~$&+,/:;=@") {
		t[c] = true
	}
	return t
}()

// stdHeader builds a request's net/http.Header (without Host, which
// net/http moves to Request.Host) with three allocations whatever the
// number of fields: the map, one string holding every canonical name and
// value, and one backing array for the value slices. Each slice is capped
// at its length, so a handler appending to one gets a copy. The extra
// byte slices are returned as strings from the same allocation.
func stdHeader(fields []HeaderField, scratch *[]byte, extra ...[]byte) (nethttp.Header, [2]string) {
	var arena []byte
	if scratch != nil {
		arena = (*scratch)[:0]
	}
	for _, e := range extra {
		arena = append(arena, e...)
	}
	n := 0
	for _, f := range fields {
		if h1.EqualFold(f.Name, "Host") {
			continue
		}
		n++
		start := len(arena)
		arena = append(arena, f.Name...)
		canonicalizeKey(arena[start:])
		arena = append(arena, f.Value...)
	}
	s := string(arena)
	if scratch != nil && cap(arena) <= 64<<10 {
		*scratch = arena[:0]
	}
	var strs [2]string
	off := 0
	for i, e := range extra[:min(len(extra), 2)] {
		strs[i] = s[off : off+len(e)]
		off += len(e)
	}
	h := make(nethttp.Header, n)
	if n == 0 {
		return h, strs
	}
	vals := make([]string, n)
	i := 0
	for _, f := range fields {
		if h1.EqualFold(f.Name, "Host") {
			continue
		}
		k := s[off : off+len(f.Name)]
		off += len(f.Name)
		v := s[off : off+len(f.Value)]
		off += len(f.Value)
		if prev, ok := h[k]; ok {
			h[k] = append(prev, v)
			continue
		}
		vals[i] = v
		h[k] = vals[i : i+1 : i+1]
		i++
	}
	return h, strs
}

// canonicalizeKey rewrites a field name (a token, as the parser checked)
// in place to the form net/textproto.CanonicalMIMEHeaderKey gives it: the
// first letter and each letter after a hyphen upper case, the others
// lower case.
func canonicalizeKey(k []byte) {
	upper := true
	for i, c := range k {
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		k[i] = c
		upper = c == '-'
	}
}

// Methods as strings and byte slices, so that the common ones cost no
// allocation per request.
var (
	methodGET     = []byte("GET")
	methodHEAD    = []byte("HEAD")
	methodPOST    = []byte("POST")
	methodPUT     = []byte("PUT")
	methodDELETE  = []byte("DELETE")
	methodPATCH   = []byte("PATCH")
	methodOPTIONS = []byte("OPTIONS")
)

// internMethod returns m as a string and as a byte slice that outlives
// the input buffer, shared for the common methods.
func internMethod(m []byte) (string, []byte) {
	switch string(m) {
	case "GET":
		return "GET", methodGET
	case "HEAD":
		return "HEAD", methodHEAD
	case "POST":
		return "POST", methodPOST
	case "PUT":
		return "PUT", methodPUT
	case "DELETE":
		return "DELETE", methodDELETE
	case "PATCH":
		return "PATCH", methodPATCH
	case "OPTIONS":
		return "OPTIONS", methodOPTIONS
	}
	s := string(m)
	return s, []byte(s)
}
