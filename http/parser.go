package http

import (
	"bytes"

	"github.com/veloq/veloq/http/internal/h1"
)

// parser states. The parser consumes the head byte by byte; the state and
// a few offsets are all it needs to resume after ErrNeedMore.
const (
	stStart      = iota // skipping empty lines before the request-line
	stMethod            // in the method
	stTarget            // in the request-target
	stVersion           // in the HTTP-version and its CRLF
	stFieldStart        // at the start of a field line or the final CRLF
	stName              // in a field name
	stValue             // in a field value
)

// fieldSpan locates one field line in the buffer.
type fieldSpan struct {
	ns, ne, vs, ve int32
}

// A parser parses HTTP/1.x request heads (RFC 9112); the server runs one
// per connection. The zero value is ready to use with the default limits.
//
// A parser is incremental: when Parse reports ErrNeedMore it remembers how
// far it got, and the next call, given the same bytes extended by newly
// read ones, continues from there instead of starting over. Only offsets
// are remembered, so the caller may move the accumulated bytes into a
// different (e.g. larger) buffer between calls. The outcome does not
// depend on how the input was split.
//
// A parser is not safe for concurrent use; each connection owns one.
type parser struct {
	// Limits bounds the head (and the body length announced in it).
	Limits h1.Limits

	state      uint8
	scan       int // where scanning resumes
	reqStart   int // start of the request-line
	methodEnd  int
	targetEnd  int
	lineStart  int // start of the current field line
	nameEnd    int // offset of the colon in the current field line
	valueStart int // where the current field value starts, after OWS
	// spans holds the fields of a head that is still incomplete, from
	// earlier calls. The fields being scanned are recorded in the
	// Request's scratch spans, so a connection whose heads arrive whole
	// (nearly all) never allocates here.
	spans []fieldSpan
}

// maxKeptSpans is the most span capacity a parser keeps between heads.
const maxKeptSpans = 16

// Reset discards any partial progress. Parse calls it itself after a
// complete head or an error; call it only to abandon a partial head.
func (p *parser) Reset() {
	p.state = stStart
	p.scan = 0
	if cap(p.spans) > maxKeptSpans {
		p.spans = nil // a long split head: free it with the head
	}
	p.spans = p.spans[:0]
}

// Parse parses the request head at the start of buf into req.
//
// On success it returns the length of the head, including any empty lines
// before the request-line; the body, or the next pipelined request, starts
// at buf[n:]. When buf holds only a prefix of a valid head it returns
// ErrNeedMore: the caller appends more input and calls again with the
// whole accumulated buffer (starting at the same request). Any other error
// is a *ProtocolError; see the package documentation for the status each
// rejection maps to.
//
// After success or a protocol error the parser is reset, ready for the
// next request. On success req's byte fields are views into buf; after
// an error or ErrNeedMore, req's contents are unspecified. The Request
// passed to the calls that continue a head need not be the same one.
//
// Parse does not allocate, except once per parser and Request to size
// the header tables.
func (p *parser) Parse(buf []byte, req *Request) (n int, err error) {
	if p.scan > len(buf) {
		// The caller restarted with a shorter buffer.
		p.Reset()
	}
	maxHead := p.Limits.HeaderBytes()
	b := buf
	if len(b) > maxHead {
		b = b[:maxHead]
	}
	if p.scan == 0 {
		// A head that is complete and plain throughout (nearly all) is
		// read in one flat pass; the machine below reads any other from
		// its start.
		if n, err, ok := p.parseWhole(b, req); ok {
			return n, err
		}
	}
	// Fields are recorded as spans (offsets: small, and nothing for the
	// garbage collector's write barrier) in req's scratch, after those
	// completed by earlier calls; fill makes them views into buf once the
	// head is complete, so a field is stored once while scanning.
	from := len(p.spans)
	req.spans = req.spans[:0]
	if from > 0 {
		req.spans = append(req.spans, p.spans...)
	}
	n, err = p.scanHead(b, req)
	if err == h1.ErrNeedMore {
		if len(buf) > maxHead {
			p.Reset()
			return 0, errHeadTooLarge
		}
		p.spans = append(p.spans, req.spans[from:]...)
		return 0, err
	}
	if err == nil {
		err = p.fill(buf[:n], req)
	}
	p.Reset()
	if err != nil {
		return 0, err
	}
	return n, nil
}

// scanHead runs the state machine over b. It returns the head length when
// the final empty line has been seen.
func (p *parser) scanHead(b []byte, req *Request) (int, error) {
	// The state lives in a register while scanning and is stored only
	// when the head is incomplete. Each state falls through to the next
	// one rather than going round the switch again (about 5 instructions
	// a step).
	i, st := p.scan, p.state
	for {
		switch st {
		case stStart:
			for {
				if i >= len(b) {
					p.scan, p.state = i, st
					return 0, h1.ErrNeedMore
				}
				if b[i] != '\r' {
					if b[i] == '\n' {
						return 0, errBareLF
					}
					break
				}
				if i+1 >= len(b) {
					p.scan, p.state = i, st
					return 0, h1.ErrNeedMore
				}
				if b[i+1] != '\n' {
					return 0, errBareCR
				}
				i += 2
			}
			p.reqStart = i
			st = stMethod
			fallthrough

		case stMethod:
			if len(b)-i >= 4 && string(b[i:i+4]) == "GET " {
				i += 3 // the common case, a token, without the byte loop
			} else {
				i += h1.TokenLen(b[i:])
			}
			if i >= len(b) {
				p.scan, p.state = i, st
				return 0, h1.ErrNeedMore
			}
			if b[i] != ' ' || i == p.reqStart {
				return 0, errBadMethod
			}
			p.methodEnd = i
			i++
			st = stTarget
			fallthrough

		case stTarget:
			ts := p.methodEnd + 1
			maxTarget := p.Limits.TargetBytes()
			// Scan at most one byte past the longest allowed target.
			lim := min(len(b), ts+maxTarget+1)
			i += h1.TargetLen(b[i:lim])
			if i-ts > maxTarget {
				return 0, errTargetTooLong
			}
			if i >= len(b) {
				p.scan, p.state = i, st
				return 0, h1.ErrNeedMore
			}
			if b[i] != ' ' || i == ts {
				return 0, errBadTarget
			}
			p.targetEnd = i
			i++
			st = stVersion
			fallthrough

		case stVersion:
			const pattern = "HTTP/D.D\r\n"
			vs := p.targetEnd + 1
			if i == vs && h1.PlainVersion(b[i:]) {
				// The whole version line at once; anything else takes the
				// byte loop below, which names the error.
				i += 10
			} else {
				for ; i < len(b); i++ {
					k := i - vs
					c := b[i]
					switch k {
					case 5, 7:
						if c < '0' || c > '9' {
							return 0, errNotHTTPVersion
						}
					case 8:
						if c != '\r' {
							return 0, errBadVersion // HTTP/D.D and then something else
						}
					case 9:
						if c != '\n' {
							return 0, errBareCR
						}
					default:
						if c != pattern[k] {
							return 0, errNotHTTPVersion
						}
					}
					if k == 9 {
						break
					}
				}
				if i >= len(b) {
					p.scan, p.state = i, st
					return 0, h1.ErrNeedMore
				}
				if b[vs+5] != '1' {
					return 0, errVersion
				}
				i++
			}
			st = stFieldStart
			fallthrough

		case stFieldStart:
			if i >= len(b) {
				p.scan, p.state = i, st
				return 0, h1.ErrNeedMore
			}
			switch c := b[i]; {
			case c == '\r':
				if i+1 >= len(b) {
					p.scan, p.state = i, st
					return 0, h1.ErrNeedMore
				}
				if b[i+1] != '\n' {
					return 0, errBareCR
				}
				return i + 2, nil
			case c == ' ' || c == '\t':
				return 0, errObsFold
			case c == '\n':
				return 0, errBareLF
			case h1.CharClass[c]&h1.ClassToken == 0:
				return 0, errBadFieldName
			}
			p.lineStart = i
			i++
			st = stName
			fallthrough

		case stName:
			i += h1.TokenLen(b[i:])
			if i >= len(b) {
				p.scan, p.state = i, st
				return 0, h1.ErrNeedMore
			}
			switch b[i] {
			case ':':
			case ' ', '\t':
				return 0, errSpaceBeforeColon
			default:
				return 0, errBadFieldName
			}
			p.nameEnd = i
			i++
			p.valueStart = i
			st = stValue
			fallthrough

		case stValue:
			if i == p.valueStart {
				// Leading OWS is skipped, not trimmed afterwards: most
				// values follow one SP. valueStart moves with it, so a
				// head split inside the OWS resumes here.
				for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
					i++
				}
				p.valueStart = i
			}
			i += h1.ValueLen(b[i:])
			if i >= len(b) {
				p.scan, p.state = i, st
				return 0, h1.ErrNeedMore
			}
			switch b[i] {
			case '\r':
			case '\n':
				return 0, errBareLF
			default:
				return 0, errBadFieldValue
			}
			if i+1 >= len(b) {
				p.scan, p.state = i, st
				return 0, h1.ErrNeedMore
			}
			if b[i+1] != '\n' {
				return 0, errBareCR
			}
			if len(req.spans) >= p.Limits.Headers() {
				return 0, errTooManyHeaders
			}
			vs, ve := p.valueStart, i
			for ve > vs && (b[ve-1] == ' ' || b[ve-1] == '\t') {
				ve--
			}
			if req.spans == nil {
				// Grown by append past this: most heads are short.
				req.spans = make([]fieldSpan, 0, min(p.Limits.Headers(), 32))
			}
			req.spans = append(req.spans, fieldSpan{int32(p.lineStart), int32(p.nameEnd), int32(vs), int32(ve)})
			i += 2
			st = stFieldStart
		}
	}
}

// parseWhole parses the head at the start of b, which is cut at the head
// limit, when it is there whole and plain: no empty line before it, a
// token method and a target followed by single spaces, "HTTP/1." and a
// digit, and plain field lines (a token, a colon, at most one SP, a value
// with no whitespace to skip or trim and no HTAB, CRLF), no more than the
// limit. It fills req as Parse does, its Headers directly rather than
// through spans, and applies the same checks. For any other input,
// incomplete included, it reports ok false having decided nothing: the
// machine then reads the head from its start, and judges it (FuzzParse
// compares the two ways).
//
// The field loop makes no call (the scanners are inlined, and work on
// indexes into b: subslices kept more values live than there are
// registers). Skipping the machine's layers and the second pass making
// Headers from spans took the parser from 1,446 to 1,265 instructions a
// request (callgrind, BenchmarkServerFastPath/epoll/depth=16); the same
// pass calling h1.FieldLine per line and field per field cost 1,297 and
// 1,335.
func (p *parser) parseWhole(b []byte, req *Request) (n int, err error, ok bool) {
	// The request-line.
	var me int
	if len(b) >= 4 && string(b[:4]) == "GET " {
		me = 3
	} else {
		me = h1.TokenLen(b)
		if me == 0 || me >= len(b) || b[me] != ' ' {
			return 0, nil, false
		}
	}
	ts := me + 1
	maxTarget := p.Limits.TargetBytes()
	// A short target ends at a SP inside b (ShortTarget), any other
	// is checked for it here.
	tn, q := h1.ShortTarget(b, ts), -1
	if tn == 0 {
		tn, q = h1.TargetQuery(b[ts:min(len(b), ts+maxTarget+1)])
		if tn == 0 || ts+tn >= len(b) || b[ts+tn] != ' ' {
			return 0, nil, false
		}
	}
	te := ts + tn
	if tn > maxTarget || !h1.PlainVersion(b[te+1:]) {
		return 0, nil, false
	}
	i := te + 11

	// The field lines, straight into Headers.
	hdrs := req.Headers[:cap(req.Headers)]
	if hdrs == nil {
		hdrs = make([]HeaderField, p.Limits.Headers())
		req.Headers = hdrs[:0] // kept should the machine read this head
	}
	maxFields := min(p.Limits.Headers(), len(hdrs))
	req.setLine(b, 0, me, te)
	// origin-form, as splitTarget would find it (CONNECT and OPTIONS,
	// the methods of 7 letters, are left to it, after the fields), with
	// the '?' found by the target's scan: splitTarget cost 62
	// instructions a request (callgrind). Done before the field loop,
	// so that q is not live across it.
	origin := b[ts] == '/' && me != 7
	if origin {
		if q >= 0 {
			q += ts
			req.Path, req.Query = b[ts:q:q], b[q+1:te:te]
		} else {
			req.Path = req.Target
		}
	}
	var f headFacts
	named := false // whether a field other than Host went to field
	k := 0
	for i < len(b) && b[i] != '\r' {
		if k == maxFields {
			return 0, nil, false
		}
		h := &hdrs[k]
		k++
		if f.hosts == 0 && h1.HostLine(b, i) {
			// Host (every request has one): told by one word compare, its
			// value checked as it is scanned (not scanned as a value and
			// checked by Request.host), and the field's work done here.
			// With this branch, and interpret's work done in this loop,
			// the parser went from 1,264 to 1,145 instructions a request
			// (callgrind, BenchmarkServerFastPath/epoll/depth=16). A
			// value that is not plain (OWS, a bad byte) the machine
			// judges. Once a Host is found the lines after it are not
			// compared (20 instructions a line, callgrind, same
			// benchmark): a second Host is a plain line, which field
			// counts and conclude refuses, as the machine does.
			vs := i + 5
			if b[vs] == ' ' {
				vs++
			}
			ve := h1.ClassEnd(b, vs, h1.ClassHost)
			if ve+1 >= len(b) || b[ve] != '\r' || b[ve+1] != '\n' {
				return 0, nil, false
			}
			h.Name, h.Value = b[i:i+4:i+4], b[vs:ve:ve]
			f.hosts, req.Host = 1, h.Value
			i = ve + 2
			continue
		}
		// A plain line: a token, a colon, at most one SP, a value with
		// no whitespace to skip or trim (nor HTAB: only SP is looked for
		// around it), CRLF.
		ne := h1.ClassEnd(b, i, h1.ClassToken)
		if ne == i || ne+1 >= len(b) || b[ne] != ':' {
			return 0, nil, false
		}
		vs := ne + 1
		if b[vs] == ' ' {
			vs++
		}
		ve := h1.PlainValueEnd(b, vs)
		if ve+1 >= len(b) || b[ve] != '\r' || b[ve+1] != '\n' || ve > vs && (b[vs] == ' ' || b[ve-1] == ' ') {
			return 0, nil, false
		}
		h.Name, h.Value = b[i:ne:ne], b[vs:ve:ve]
		i = ve + 2
		// interpret's work, while the field is at hand. A field it
		// refuses is left to the machine, which names the error once the
		// head is complete.
		if mayBeNamed(h.Name) {
			named = true
			if req.field(&f, h.Name, h.Value) != nil {
				return 0, nil, false
			}
		}
	}
	if i+1 >= len(b) || b[i+1] != '\n' {
		return 0, nil, false
	}
	req.Headers = hdrs[:k]
	if !origin {
		if err := req.splitTarget(); err != nil {
			return 0, err, true
		}
	}
	if named || f.hosts == 0 || req.ProtoMinor == 0 {
		if err := req.conclude(&f, &p.Limits); err != nil {
			return 0, err, true
		}
	}
	// Otherwise an HTTP/1.1 head with one Host and no other field
	// conclude looks at (nearly all GETs): it would change nothing that
	// setLine did not set, at 37 instructions a request (callgrind).
	return i + 2, nil, true
}

// fill completes req from the head in b, its fields from their spans,
// and applies the semantic checks that need the whole header section.
func (p *parser) fill(b []byte, req *Request) error {
	if cap(req.Headers) < len(req.spans) || req.Headers == nil {
		req.Headers = make([]HeaderField, 0, max(len(req.spans), p.Limits.Headers()))
	}
	hdrs := req.Headers[:len(req.spans)]
	for i, s := range req.spans {
		hdrs[i] = HeaderField{b[s.ns:s.ne:s.ne], b[s.vs:s.ve:s.ve]}
	}
	req.Headers = hdrs
	req.setLine(b, p.reqStart, p.methodEnd, p.targetEnd)
	if err := req.splitTarget(); err != nil {
		return err
	}
	return req.interpret(&p.Limits)
}

// setLine sets req's fields from the request-line in b (the method at
// reqStart, ending at methodEnd, a target ending at targetEnd, then a
// valid version) and clears the others the head may set.
func (r *Request) setLine(b []byte, reqStart, methodEnd, targetEnd int) {
	// Field by field rather than a composite literal: that would clear the
	// router's parameter array as well, a third of the struct, on every
	// request, while nparams = 0 is enough to empty it.
	r.Method = b[reqStart:methodEnd:methodEnd]
	r.Target = b[methodEnd+1 : targetEnd : targetEnd]
	r.Path, r.Query, r.Host, r.Upgrade, r.Body = nil, nil, nil, nil, nil
	r.ProtoMajor, r.ProtoMinor = 1, int(b[targetEnd+8]-'0')
	r.ContentLength = -1
	r.Chunked, r.Close, r.Expect100, r.streamed, r.bodyStreams = false, false, false, false, false
	r.nparams, r.pattern = 0, ""
}

// splitTarget checks the form of the request-target against the method
// (RFC 9112 §3.2) and sets Path and Query.
func (r *Request) splitTarget() error {
	t := r.Target
	isConnect := string(r.Method) == "CONNECT"
	switch {
	case isConnect:
		// authority-form: uri-host ":" port.
		if t[0] == '/' {
			return errBadTarget
		}
		for _, c := range t {
			if h1.CharClass[c]&h1.ClassHost == 0 {
				return errBadTarget
			}
		}
		return nil
	case t[0] == '/':
		// origin-form
	case len(t) == 1 && t[0] == '*':
		if string(r.Method) != "OPTIONS" {
			return errBadTarget
		}
		r.Path = t
		return nil
	default:
		// absolute-form: scheme "://" authority path-abempty [ "?" query ].
		i := bytes.Index(t, []byte("://"))
		if i <= 0 || !isAlpha(t[0]) {
			return errBadTarget
		}
		for _, c := range t[1:i] {
			if !isAlpha(c) && !('0' <= c && c <= '9') && c != '+' && c != '-' && c != '.' {
				return errBadTarget
			}
		}
		rest := t[i+3:]
		j := 0
		for j < len(rest) && rest[j] != '/' && rest[j] != '?' {
			j++
		}
		t = rest[j:]
	}
	if q := indexQuery(t); q >= 0 {
		r.Path = t[:q:q]
		r.Query = t[q+1:]
	} else {
		r.Path = t
	}
	return nil
}

// indexQuery returns the index of the first '?' in a target, or -1. A
// short target is looked through here: calling bytes.IndexByte cost 25
// instructions on "/" (callgrind).
func indexQuery(t []byte) int {
	if len(t) > 16 {
		return bytes.IndexByte(t, '?')
	}
	for i, c := range t {
		if c == '?' {
			return i
		}
	}
	return -1
}

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// headFacts is what interpret learns from the fields the server looks
// at, the rare ones through their own functions.
type headFacts struct {
	hosts                    int
	hasCL, hasTE             bool
	teChunkedLast, teChunked bool
	teUnknown                bool
	connClose, connKeepAlive bool
	connUpgrade              bool
	expect100, expectUnknown bool
	upgrade                  []byte
}

// interpret extracts from r.Headers the fields the server needs for
// framing and connection management and rejects the combinations RFC
// 9112 forbids.
func (r *Request) interpret(l *h1.Limits) error {
	var f headFacts
	for i := range r.Headers {
		h := &r.Headers[i]
		if !mayBeNamed(h.Name) {
			continue
		}
		if err := r.field(&f, h.Name, h.Value); err != nil {
			return err
		}
	}
	return r.conclude(&f, l)
}

// namedFirst holds, by length, the first letter of the name of that
// length that field looks at (Host, Expect, Upgrade, Connection,
// Content-Length, Transfer-Encoding), or 0.
var namedFirst = [18]byte{4: 'h', 6: 'e', 7: 'u', 10: 'c', 14: 'c', 17: 't'}

// mayBeNamed reports whether name may be one of the fields field looks
// at: a test of its length and first letter, inlined, so that a field
// loop calls field only for those (most fields are others: Accept,
// User-Agent).
func mayBeNamed(name []byte) bool {
	return len(name) < len(namedFirst) && name[0]|0x20 == namedFirst[len(name)]
}

// field looks at one field, adding what it says to f; fields for which
// mayBeNamed is false are none of its business. It keeps only what every
// field needs in registers, and the fields that are not Host are looked
// at in functions of their own: with all their state here, spills cost
// 68 instructions a field and 154 a request (callgrind,
// BenchmarkServerFastPath/epoll/depth=16).
func (r *Request) field(f *headFacts, name, value []byte) error {
	switch len(name) {
	case 4:
		if h1.IsHost(name) {
			return r.host(f, value)
		}
	case 6:
		if h1.TokenEqualFold(name, "expect") {
			f.expect(value)
		}
	case 7:
		if h1.TokenEqualFold(name, "upgrade") {
			f.upgrade = value
		}
	case 10:
		if h1.TokenEqualFold(name, "connection") {
			f.connection(value)
		}
	case 14:
		if h1.TokenEqualFold(name, "content-length") {
			return r.contentLength(f, value)
		}
	case 17:
		if h1.TokenEqualFold(name, "transfer-encoding") {
			return f.transferEncoding(value)
		}
	}
	return nil
}

// host checks a Host field's value (RFC 9112 §3.2).
func (r *Request) host(f *headFacts, value []byte) error {
	f.hosts++
	// One test after the loops instead of a branch per byte, eight
	// bytes a step: 9 instructions a byte with a branch each, 6 four
	// bytes a step, about 4 now (callgrind).
	t, all, v := &h1.CharClass, uint8(h1.ClassHost), value
	for ; len(v) >= 8; v = v[8:] {
		all &= t[v[0]] & t[v[1]] & t[v[2]] & t[v[3]] & t[v[4]] & t[v[5]] & t[v[6]] & t[v[7]]
	}
	if len(v) >= 4 {
		all &= t[v[0]] & t[v[1]] & t[v[2]] & t[v[3]]
		v = v[4:]
	}
	for _, c := range v {
		all &= t[c]
	}
	if all == 0 {
		return errBadHost
	}
	r.Host = value
	return nil
}

//go:noinline
func (f *headFacts) expect(value []byte) {
	for list := value; len(list) > 0; {
		var e []byte
		e, list = h1.NextListElem(list)
		switch {
		case len(e) == 0:
		case h1.EqualFold(e, "100-continue"):
			f.expect100 = true
		default:
			f.expectUnknown = true
		}
	}
}

// connection reads the options of a Connection field. The elements of a
// field value hold no CR, so TokenEqualFold is exact for them too.
//
//go:noinline
func (f *headFacts) connection(value []byte) {
	for list := value; len(list) > 0; {
		var o []byte
		o, list = h1.NextListElem(list)
		switch {
		case h1.TokenEqualFold(o, "close"):
			f.connClose = true
		case h1.TokenEqualFold(o, "keep-alive"):
			f.connKeepAlive = true
		case h1.TokenEqualFold(o, "upgrade"):
			f.connUpgrade = true
		}
	}
}

//go:noinline
func (r *Request) contentLength(f *headFacts, value []byte) error {
	// A list of identical values is accepted (RFC 9110 §8.6).
	for list := value; ; {
		var v []byte
		v, list = h1.NextListElem(list)
		n, ok := parseContentLength(v)
		if !ok {
			return errBadContentLength
		}
		if f.hasCL && n != r.ContentLength {
			return errDiffContentLength
		}
		f.hasCL = true
		r.ContentLength = n
		if list == nil {
			return nil
		}
	}
}

//go:noinline
func (f *headFacts) transferEncoding(value []byte) error {
	f.hasTE = true
	for list := value; len(list) > 0; {
		var c []byte
		c, list = h1.NextListElem(list)
		if len(c) == 0 {
			continue
		}
		if name := c[:len(c)-len(afterByte(c, ';'))]; !h1.ValidToken(h1.TrimOWS(name)) {
			return errBadTransferCoding
		}
		f.teChunkedLast = h1.EqualFold(c, "chunked")
		if !f.teChunkedLast {
			f.teUnknown = true
		} else if f.teChunked {
			return errTEChunkedTwice
		}
		f.teChunked = f.teChunked || f.teChunkedLast
	}
	return nil
}

// conclude applies what the fields said to r, and the rules on their
// combinations.
func (r *Request) conclude(f *headFacts, l *h1.Limits) error {
	http11 := r.ProtoMinor >= 1
	if f.hosts > 1 {
		return errMultipleHost
	}
	if http11 && f.hosts == 0 {
		return errMissingHost
	}
	if f.hasTE {
		if f.hasCL {
			return errCLAndTE
		}
		if !http11 {
			return errTEHTTP10
		}
		if !f.teChunkedLast {
			return errTENotChunked
		}
		if f.teUnknown {
			return errTEUnsupported
		}
		r.Chunked = true
		r.ContentLength = -1
	}
	if r.ContentLength > l.BodyBytes() {
		return errBodyTooLarge
	}
	if http11 {
		if f.expectUnknown {
			return errExpectation
		}
		r.Expect100 = f.expect100
		r.Close = f.connClose
		if f.connUpgrade && f.upgrade != nil {
			r.Upgrade = f.upgrade
		}
	} else {
		r.Close = f.connClose || !f.connKeepAlive
	}
	return nil
}

// parseContentLength parses 1*DIGIT into a non-negative int64.
func parseContentLength(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// afterByte returns the part of b starting at the first c, or nil.
func afterByte(b []byte, c byte) []byte {
	if i := bytes.IndexByte(b, c); i >= 0 {
		return b[i:]
	}
	return nil
}
