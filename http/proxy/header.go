package proxy

// Hop-by-hop fields (RFC 9110 §7.6.1) describe one connection, so a proxy
// removes them from what it forwards, both ways: Connection and every
// field it names, Keep-Alive, Proxy-Connection, TE (except "trailers",
// which the proxy can honour end to end because it forwards trailers),
// Transfer-Encoding and Upgrade (kept for an upgrade: upgrade.go). The
// proxy also drops the fields it re-frames itself: Content-Length (the
// client library and the Responder frame the forwarded message from its
// real length) and, on requests, Host (sent from the request's authority)
// and Expect (the server already answered 100-continue and read the
// body).

import (
	"bytes"

	"github.com/veloq/veloq/http/client"
	"github.com/veloq/veloq/http/internal/h1"
)

// fieldKind classifies a field name for forwarding.
type fieldKind uint8

const (
	kindPass      fieldKind = iota
	kindHop                 // hop-by-hop: dropped
	kindFramed              // framing the proxy redoes: dropped
	kindTE                  // TE: only "trailers" passes
	kindHost                // Host: sent separately
	kindConn                // Connection: dropped, and names more to drop
	kindXFF                 // X-Forwarded-For: appended to
	kindXFwd                // X-Forwarded-Proto / -Host: replaced
	kindExpect              // Expect: answered by the server already
	kindForwarded           // Forwarded: appended to when enabled
)

// classify returns the kind of a field name, case-insensitively, with a
// switch on the length first so that most names are ruled out by one
// comparison of an int, and the one or two candidates compared a word at
// a time (h1.TokenEqualFold: a byte at a time, classify cost 48
// instructions a field of an nginx answer, callgrind). A name that is not
// a token (HTTP/2 carries any bytes) is classified as a token would be,
// except that a CR where a name has '-' matches: such a field is dropped,
// or its value (still checked) merged into X-Forwarded-For, where package
// http and the client would refuse it anyway.
func classify(name []byte) fieldKind {
	switch len(name) {
	case 2:
		if h1.TokenEqualFold(name, "te") {
			return kindTE
		}
	case 4:
		if h1.TokenEqualFold(name, "host") {
			return kindHost
		}
	case 6:
		if h1.TokenEqualFold(name, "expect") {
			return kindExpect
		}
	case 7:
		if h1.TokenEqualFold(name, "upgrade") {
			return kindHop
		}
	case 9:
		if h1.TokenEqualFold(name, "forwarded") {
			return kindForwarded
		}
	case 10:
		if h1.TokenEqualFold(name, "connection") {
			return kindConn
		}
		if h1.TokenEqualFold(name, "keep-alive") {
			return kindHop
		}
	case 14:
		if h1.TokenEqualFold(name, "content-length") {
			return kindFramed
		}
	case 15:
		if h1.TokenEqualFold(name, "x-forwarded-for") {
			return kindXFF
		}
	case 16:
		if h1.TokenEqualFold(name, "proxy-connection") {
			return kindHop
		}
		if h1.TokenEqualFold(name, "x-forwarded-host") {
			return kindXFwd
		}
	case 17:
		if h1.TokenEqualFold(name, "transfer-encoding") {
			return kindHop
		}
		if h1.TokenEqualFold(name, "x-forwarded-proto") {
			return kindXFwd
		}
	}
	return kindPass
}

// foldEq reports whether b equals the lower-case ASCII string s, ignoring
// the case of b.
func foldEq(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// foldEqBytes reports whether a and b are equal ignoring ASCII case.
func foldEqBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// appendConnTokens appends to toks the tokens of a Connection field value
// v that could name a field the proxy would otherwise forward. Tokens
// naming fields it drops anyway (hop-by-hop, Connection, framing, such
// as the "keep-alive" most upstreams send) are left out, so that a
// message whose Connection names nothing else costs no per-field lookups:
// splitting the value again for every field cost 1,700 instructions per
// nginx response (callgrind, cmd/veloq-proxy -backend epoll).
func appendConnTokens(toks [][]byte, v []byte) [][]byte {
	// The common value, nginx's lone "keep-alive", is looked up whole:
	// splitting it cost 270 instructions per nginx answer (callgrind,
	// cmd/veloq-proxy -backend epoll).
	switch classify(v) {
	case kindHop, kindConn, kindFramed:
		return toks
	}
	for len(v) > 0 {
		var tok []byte
		tok, v = nextToken(v)
		switch classify(tok) {
		case kindHop, kindConn, kindFramed:
			continue
		}
		if len(tok) > 0 {
			toks = append(toks, tok)
		}
	}
	return toks
}

// listed reports whether name is one of toks (from appendConnTokens),
// ignoring case.
func listed(toks [][]byte, name []byte) bool {
	for _, tok := range toks {
		if foldEqBytes(tok, name) {
			return true
		}
	}
	return false
}

// nextToken splits the first element off a comma-separated list, with
// optional whitespace around it removed.
func nextToken(v []byte) (tok, rest []byte) {
	i := 0
	for i < len(v) && v[i] != ',' {
		i++
	}
	tok, rest = v[:i], v[i:]
	if len(rest) > 0 {
		rest = rest[1:]
	}
	for len(tok) > 0 && (tok[0] == ' ' || tok[0] == '\t') {
		tok = tok[1:]
	}
	for len(tok) > 0 && (tok[len(tok)-1] == ' ' || tok[len(tok)-1] == '\t') {
		tok = tok[:len(tok)-1]
	}
	return tok, rest
}

// hasToken reports whether the list v holds token tok (lower case),
// ignoring parameters after a ';' (as in "trailers;q=1" — TE's own
// grammar has none for trailers, but tolerating them costs nothing).
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		var t []byte
		t, v = nextToken(v)
		for i, c := range t {
			if c == ';' {
				t = t[:i]
				break
			}
		}
		if foldEq(t, tok) {
			return true
		}
	}
	return false
}

// grpcAnswer reports whether a response's Content-Type is gRPC's
// (application/grpc, application/grpc+proto, ...).
func grpcAnswer(fields []client.Field) bool {
	for i := range fields {
		if bytes.EqualFold(fields[i].Name, nameContentType) {
			v := fields[i].Value
			return len(v) >= len(valGRPC) && bytes.EqualFold(v[:len(valGRPC)], valGRPC)
		}
	}
	return false
}

// grpcStatusField: the fields gRPC sends in trailers. An HTTP/2 upstream
// may send them in a head that ends the stream (Trailers-Only); the proxy
// forwards them as trailers, since its front sends a head and ends the
// stream in separate frames, and gRPC clients read a status only from
// trailers then.
func grpcStatusField(name []byte) bool {
	return bytes.EqualFold(name, nameGRPCStatus) || bytes.EqualFold(name, nameGRPCMessage) ||
		bytes.EqualFold(name, nameGRPCDetails)
}

var (
	nameContentType = []byte("Content-Type")
	valGRPC         = []byte("application/grpc")
	nameGRPCStatus  = []byte("grpc-status")
	nameGRPCMessage = []byte("grpc-message")
	nameGRPCDetails = []byte("grpc-status-details-bin")
)
