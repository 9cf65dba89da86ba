package client

// The response parser: a pure function over the bytes received, with no
// I/O and no allocation, so it can be unit-tested and fuzzed alone
// (FuzzParseResponse). It reads a response head as a view into the
// connection's input and decides how the body is framed (RFC 9112 §6.3).

import (
	"bytes"
	"errors"

	"github.com/veloq/veloq/http/internal/h1"
)

// errNeedMore: the head is not complete yet.
var errNeedMore = errors.New("client: need more input")

// Default limits on a response head.
const (
	DefaultMaxResponseHeaderBytes = 64 << 10
	DefaultMaxResponseFields      = 128
)

// framing is how a response body is delimited.
type framing uint8

const (
	frameNone    framing = iota // no body (HEAD, 1xx, 204, 304)
	frameLength                 // Content-Length
	frameChunked                // Transfer-Encoding: chunked
	frameClose                  // until the upstream closes
)

// parsedHead is what the parser learns beyond ResponseHead.
type parsedHead struct {
	frame     framing
	length    int64 // with frameLength
	keepAlive bool  // the connection may carry another request after this response
}

// parseLimits bounds a response head.
type parseLimits struct {
	maxBytes  int
	maxFields int
}

func (l parseLimits) bytes() int {
	if l.maxBytes > 0 {
		return l.maxBytes
	}
	return DefaultMaxResponseHeaderBytes
}

func (l parseLimits) fields() int {
	if l.maxFields > 0 {
		return l.maxFields
	}
	return DefaultMaxResponseFields
}

// parseResponseHead parses one response head at the start of in into h
// (whose Fields slice is reused) and returns its length including the
// empty line. It returns errNeedMore when in holds no complete head yet
// and is still within the limit, a *ProtocolError otherwise. headReq says
// the request was HEAD (no body, whatever the fields say). The views in h
// point into in.
func parseResponseHead(in []byte, lim parseLimits, headReq bool, h *ResponseHead, p *parsedHead) (int, error) {
	// A whole, valid head is parsed as it is read, its end found by the
	// line walk; only a head that is incomplete or refused is looked at
	// again below, to tell the two apart and name the error. Searching
	// every head for CRLFCRLF first cost 1,390 instructions per nginx
	// response head (callgrind, cmd/veloq-proxy -backend epoll).
	if n, err := parseHead(in[:min(len(in), lim.bytes())], lim, headReq, h, p); err == nil {
		return n, nil
	}
	end := bytes.Index(in[:min(len(in), lim.bytes())], crlfcrlf)
	if end < 0 {
		if len(in) >= lim.bytes() {
			return 0, protoErr("response head larger than the limit")
		}
		if !validLFs(in) {
			return 0, protoErr("bare CR or LF in response head")
		}
		return 0, errNeedMore
	}
	n, err := parseHead(in[:end+4], lim, headReq, h, p)
	if err != nil {
		// The line checks refuse every bare CR or LF, but under another
		// name; a head with one is refused for it, whatever else it holds.
		if !validLFs(in[:end+2]) {
			return 0, protoErr("bare CR or LF in response head")
		}
		return 0, err
	}
	return n, nil
}

// parseHead parses the status line and field lines at the start of in,
// up to and including the empty line that ends them, and returns the
// head's length. Each line is checked to end in CRLF, so a head it
// accepts holds no bare CR or LF, and its empty line is the first CRLFCRLF
// in in: the separate scans for them (validLFs, bytes.Index) are needed
// only to name an error. Walking each line once (nextFieldLine) instead
// of scanning the head for bare CRs and LFs and then each line three more
// times took parseResponseHead from 9,300 to 5,600 instructions per nginx
// response head (callgrind, cmd/veloq-proxy -backend epoll).
func parseHead(in []byte, lim parseLimits, headReq bool, h *ResponseHead, p *parsedHead) (int, error) {
	lf := bytes.IndexByte(in, '\n')
	if lf < 1 || in[lf-1] != '\r' {
		return 0, protoErr("malformed status line")
	}
	if err := parseStatusLine(in[:lf-1], h); err != nil {
		return 0, err
	}
	h.Fields = h.Fields[:0]
	h.ContentLength = -1
	n, err := parseFields(in[lf+1:], lim, h, p)
	if err != nil {
		return 0, err
	}
	return lf + 1 + n, decideFraming(headReq, h, p)
}

var crlfcrlf = []byte("\r\n\r\n")

// validLFs reports whether every LF in b is preceded by a CR and every CR
// followed by an LF (RFC 9112 §2.2: a bare CR or LF is refused, since
// parsers that accept them disagree on where a line ends).
func validLFs(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\n':
			if i == 0 || b[i-1] != '\r' {
				return false
			}
		case '\r':
			if i+1 < len(b) && b[i+1] != '\n' {
				return false
			}
		}
	}
	return true
}

// parseStatusLine parses "HTTP/1.x SP 3DIGIT SP reason" (RFC 9112 §4);
// the SP after the code may be missing when the reason is empty.
func parseStatusLine(line []byte, h *ResponseHead) error {
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || line[8] != ' ' {
		return protoErr("malformed status line")
	}
	minor := line[7]
	if minor != '0' && minor != '1' {
		return protoErr("unsupported HTTP version")
	}
	h.Minor = int(minor - '0')
	code := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return protoErr("malformed status code")
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 {
		return protoErr("malformed status code")
	}
	h.Status = code
	rest := line[12:]
	if len(rest) > 0 {
		if rest[0] != ' ' {
			return protoErr("malformed status line")
		}
		rest = rest[1:]
	}
	for _, c := range rest {
		if c < ' ' && c != '\t' || c == 0x7f {
			return protoErr("control character in reason phrase")
		}
	}
	h.Reason = rest[:len(rest):len(rest)]
	return nil
}

// parseFields parses the field lines at the start of in (each ending in
// CRLF) into h.Fields up to the empty line that ends them, reads the
// fields that frame the body and decide the connection's reuse, and
// returns the length of the lines with the empty line.
func parseFields(in []byte, lim parseLimits, h *ResponseHead, p *parsedHead) (int, error) {
	*p = parsedHead{keepAlive: h.Minor == 1}
	var te, connKeep bool
	block := in
	for len(block) < 2 || block[0] != '\r' || block[1] != '\n' {
		if len(block) > 0 && (block[0] == ' ' || block[0] == '\t') {
			return 0, protoErr("obs-fold in response head")
		}
		f, rest, ok := nextFieldLine(block)
		if !ok {
			return 0, protoErr("malformed field line")
		}
		block = rest
		if len(h.Fields) == lim.fields() {
			return 0, protoErr("too many fields in response head")
		}
		h.Fields = append(h.Fields, f)
		switch {
		case asciiEqualFold(f.Name, "content-length"):
			if err := parseContentLength(f.Value, h); err != nil {
				return 0, err
			}
		case asciiEqualFold(f.Name, "transfer-encoding"):
			if te || !asciiEqualFold(f.Value, "chunked") {
				return 0, protoErr("unsupported transfer coding")
			}
			te = true
		case asciiEqualFold(f.Name, "connection"):
			if hasToken(f.Value, "close") {
				p.keepAlive = false
			}
			// keep-alive matters only to HTTP/1.0, where it is not the
			// default: looking for it in every nginx answer's
			// "Connection: keep-alive" cost 180 instructions.
			if h.Minor == 0 && hasToken(f.Value, "keep-alive") {
				connKeep = true
			}
		}
	}
	if h.Minor == 0 && connKeep {
		p.keepAlive = true
	}
	if te {
		if h.ContentLength >= 0 {
			return 0, protoErr("both Content-Length and Transfer-Encoding")
		}
		if h.Minor == 0 {
			return 0, protoErr("Transfer-Encoding in an HTTP/1.0 response")
		}
		p.frame = frameChunked
	}
	return len(in) - len(block) + 2, nil
}

// nextFieldLine parses the first line of block, which must be a token
// name, a colon right after it and a value of field-value bytes (no
// control characters other than HTAB) ending in CRLF, and returns the
// field (views, the value without its surrounding whitespace) and the
// rest of block. It walks the line once with h1's tables (the value eight
// bytes at a time) where validFieldLine and h1.NextField walked it four
// times. A plain line (no whitespace to trim, no HTAB) is read by
// plainFieldLine, with the server parser's scanners, which take the name
// four bytes a step where TokenLen takes it a byte at a time; any other
// line, which plainFieldLine leaves, by the walk below, which agrees with
// plainFieldLine on every line plainFieldLine takes.
func nextFieldLine(block []byte) (f Field, rest []byte, ok bool) {
	if ne, vs, ve, n := plainFieldLine(block); n > 0 {
		return Field{Name: block[:ne:ne], Value: block[vs:ve:ve]}, block[n:], true
	}
	return walkFieldLine(block)
}

// plainFieldLine reads the field line at the start of b when it is
// complete and plain: a token, a colon, at most one SP, a value with no
// whitespace to skip or trim and no HTAB, then CRLF. It returns where the
// name ends (the colon), where the value starts and ends, and the line's
// length with its CRLF; n is 0 for any other line, left to walkFieldLine.
func plainFieldLine(b []byte) (ne, vs, ve, n int) {
	ne = h1.ClassEnd(b, 0, h1.ClassToken)
	if ne == 0 || ne+2 > len(b) || b[ne] != ':' {
		return 0, 0, 0, 0
	}
	vs = ne + 1
	if b[vs] == ' ' {
		vs++
	}
	ve = h1.PlainValueEnd(b, vs)
	if ve+2 > len(b) || b[ve] != '\r' || b[ve+1] != '\n' {
		return 0, 0, 0, 0
	}
	if ve > vs && (b[vs] == ' ' || b[ve-1] == ' ') {
		return 0, 0, 0, 0 // OWS to skip or trim
	}
	return ne, vs, ve, ve + 2
}

// walkFieldLine is nextFieldLine for any line: the name a byte at a time.
func walkFieldLine(block []byte) (f Field, rest []byte, ok bool) {
	n := h1.TokenLen(block)
	if n == 0 || n == len(block) || block[n] != ':' {
		return Field{}, nil, false
	}
	v := block[n+1:]
	m := h1.ValueLen(v)
	if m+2 > len(v) || v[m] != '\r' || v[m+1] != '\n' {
		return Field{}, nil, false
	}
	val := h1.TrimOWS(v[:m])
	return Field{Name: block[:n:n], Value: val[:len(val):len(val)]}, v[m+2:], true
}

// validFieldLine checks the first line of block: a token name, a colon
// right after it, and a value without control characters other than HTAB.
func validFieldLine(block []byte) bool {
	lf := bytes.IndexByte(block, '\n')
	if lf < 1 {
		return false
	}
	line := block[:lf-1]
	i := 0
	for i < len(line) && isTokenChar(line[i]) {
		i++
	}
	if i == 0 || i == len(line) || line[i] != ':' {
		return false
	}
	for _, c := range line[i+1:] {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// parseContentLength reads a Content-Length value, which may repeat the
// same length in a list or in several field lines (RFC 9110 §8.6);
// differing lengths are refused.
func parseContentLength(v []byte, h *ResponseHead) error {
	for len(v) > 0 {
		var item []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = bytes.TrimRight(v[:i], " \t"), bytes.TrimLeft(v[i+1:], " \t")
		} else {
			item, v = v, nil
		}
		if len(item) == 0 || len(item) > 18 {
			return protoErr("malformed Content-Length")
		}
		var n int64
		for _, c := range item {
			if c < '0' || c > '9' {
				return protoErr("malformed Content-Length")
			}
			n = n*10 + int64(c-'0')
		}
		if h.ContentLength >= 0 && h.ContentLength != n {
			return protoErr("differing Content-Length values")
		}
		h.ContentLength = n
	}
	if h.ContentLength < 0 {
		return protoErr("malformed Content-Length")
	}
	return nil
}

// decideFraming applies RFC 9112 §6.3 to a parsed head.
func decideFraming(headReq bool, h *ResponseHead, p *parsedHead) error {
	switch {
	case h.Status < 200 || h.Status == 204 || h.Status == 304 || headReq:
		p.frame = frameNone
		if h.Status == 101 {
			p.keepAlive = false
		}
	case p.frame == frameChunked:
	case h.ContentLength >= 0:
		p.frame = frameLength
		p.length = h.ContentLength
	default:
		p.frame = frameClose
		p.keepAlive = false
	}
	if p.frame == frameChunked && h.Status >= 200 && !headReq {
		h.ContentLength = -1
	}
	return nil
}

// isTokenChar reports whether c is a tchar (RFC 9110 §5.6.2), from the
// table h1 keeps for the server's parser.
func isTokenChar(c byte) bool { return h1.IsToken(c) }

// asciiEqualFold reports whether b equals the lower-case ASCII s, ignoring
// case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
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

// hasToken reports whether the comma-separated list v holds the token s
// (lower case), ignoring case. Its items are trimmed with h1.TrimOWS:
// bytes.Trim built a set of its cutset on every call, 200 instructions
// per nginx response head for its "Connection: keep-alive" (callgrind,
// cmd/veloq-proxy -backend epoll).
func hasToken(v []byte, s string) bool {
	for len(v) > 0 {
		var item []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			item, v = v, nil
		}
		if asciiEqualFold(h1.TrimOWS(item), s) {
			return true
		}
	}
	return false
}
