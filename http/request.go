package http

import "github.com/veloq/veloq/http/internal/h1"

// A HeaderField is one field line: a name and a value with surrounding
// whitespace removed. In a parsed [Request] both are views into the
// caller's buffer.
type HeaderField struct {
	Name  []byte
	Value []byte
}

// A Request is the parsed head of an HTTP/1.x request. It is a view: every
// []byte field aliases the connection's input buffer and is valid only
// while that buffer is unchanged. The views are capped (three-index
// slices), so appending to one never overwrites the buffer.
//
// A Request is meant to be reused for successive requests on a connection;
// the server resets it.
type Request struct {
	// Method is the request method, a non-empty token. Methods are case
	// sensitive.
	Method []byte
	// Target is the raw request-target: an origin-form path and query
	// ("/a/b?x=1"), an absolute-form URI, an authority (CONNECT) or "*"
	// (OPTIONS).
	Target []byte
	// Path is the part of Target before the first '?'. For an
	// absolute-form target it starts at the path of the URI and is empty if
	// the URI has no path (meaning "/"); for CONNECT it is empty.
	Path []byte
	// Query is the raw query without the '?'; nil when there is none.
	Query []byte

	// ProtoMajor is 1, or 2 for an HTTP/2 request. ProtoMinor is the
	// digit after "HTTP/1." (0 for HTTP/2); minor versions above 1 are
	// handled as HTTP/1.1.
	ProtoMajor, ProtoMinor int

	// Headers holds the field lines in order of arrival.
	Headers []HeaderField

	// Host is the value of the Host header, nil if absent (possible only
	// in HTTP/1.0). For an absolute-form Target, RFC 9112 §3.2.2 says the
	// authority in Target takes precedence; the parser leaves that choice
	// to the server and does not compare the two.
	Host []byte
	// ContentLength is the value of Content-Length, or -1 if the request
	// has none. It is -1 when Chunked is set.
	ContentLength int64
	// Chunked is set when the body uses the chunked transfer coding; the
	// server decodes it before the handler sees Body.
	Chunked bool
	// Close is set when the connection must be closed after the response:
	// HTTP/1.1 with "Connection: close", or HTTP/1.0 without
	// "Connection: keep-alive".
	Close bool
	// Expect100 is set for an HTTP/1.1 request carrying
	// "Expect: 100-continue": the client waits for an interim
	// "100 Continue", which the server sends, before sending the body.
	Expect100 bool
	// Upgrade is the value of the Upgrade header of an HTTP/1.1 request
	// whose Connection header lists "upgrade"; nil otherwise.
	Upgrade []byte

	// streamed is set for an HTTP/2 request whose body follows in DATA
	// frames, whatever its length.
	streamed bool
	// bodyStreams is set while a StreamBody handler runs on a request
	// whose body follows: it reaches the handler's Responder (OnBody).
	bodyStreams bool

	// Body is the whole request body, set by [Server] before a [Handler]
	// runs (Content-Length or decoded chunked); nil when there is none.
	// The parser does not set it.
	Body []byte

	// Wildcard values set by a Router (see PathValue).
	params  [maxPathParams]pathParam
	nparams int
	// pattern is the Router pattern that matched, which the server keeps
	// to name the route in the blocked-loop warning.
	pattern string

	// spans is the parser's scratch: where each field of the head being
	// parsed lies, kept with the Request (one per loop in the server)
	// rather than with each connection's parser.
	spans []fieldSpan
}

// Reset clears r, keeping the capacity of Headers.
func (r *Request) Reset() {
	h, s := r.Headers[:0], r.spans[:0]
	*r = Request{Headers: h, ContentLength: -1, spans: s}
}

// Lookup returns the value of the first field named name (compared case
// insensitively) and whether there is one.
func (r *Request) Lookup(name string) ([]byte, bool) {
	for i := range r.Headers {
		if h1.EqualFold(r.Headers[i].Name, name) {
			return r.Headers[i].Value, true
		}
	}
	return nil, false
}

// Header returns the value of the first field named name, compared case
// insensitively, or nil. A field present with an empty value yields a
// non-nil empty slice.
func (r *Request) Header(name string) []byte {
	v, _ := r.Lookup(name)
	return v
}

// KeepAlive reports whether the connection may carry another request after
// this one; it is !r.Close.
func (r *Request) KeepAlive() bool { return !r.Close }

// HasBody reports whether a message body follows the head.
func (r *Request) HasBody() bool { return r.Chunked || r.ContentLength > 0 || r.streamed }

// IsHead reports whether the method is HEAD.
func (r *Request) IsHead() bool { return string(r.Method) == "HEAD" }
