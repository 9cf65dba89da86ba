package http

import (
	"bytes"
	"strconv"

	"github.com/veloq/veloq/http/internal/h1"
	"github.com/veloq/veloq/http/internal/h2"
	"golang.org/x/net/http2/hpack"
)

// HTTP/2 header blocks: a request's fields, decoded by HPACK, checked
// against RFC 9113 §8.2–8.3 and turned into a Request; a response's head
// encoded from a response.

// errMalformed is a request whose fields break RFC 9113 §8.2–8.3: a
// stream error PROTOCOL_ERROR (§8.1.1).
func errMalformed(id uint32, reason string) *h2.Error {
	return h2.StreamError(id, h2.ProtocolError, "malformed request: "+reason)
}

// emitField collects a field the HPACK decoder produced, counting the
// header list's size as SETTINGS_MAX_HEADER_LIST_SIZE does (RFC 9113
// §6.5.2: name, value and 32 per field). Past the bound the decoder goes
// on (its table must stay in step with the client's) without collecting.
func (hc *h2Conn) emitField(f hpack.HeaderField) {
	hc.listSize += f.Size()
	if hc.listSize > hc.maxListSize {
		hc.listTooBig = true
		hc.dec.SetEmitEnabled(false)
		return
	}
	sh := hc.ls.h2
	sh.fields = append(sh.fields, f)
}

// decodeBlock runs a complete header block through the decoder. A block
// the decoder cannot read is a connection error COMPRESSION_ERROR
// (RFC 9113 §4.3): the dynamic table is no longer known.
func (hc *h2Conn) decodeBlock(block []byte) error {
	hc.ls.h2.fields = hc.ls.h2.fields[:0]
	hc.listSize, hc.listTooBig = 0, false
	hc.dec.SetEmitEnabled(true)
	if _, err := hc.dec.Write(block); err != nil {
		return h2.ConnError(h2.CompressionError, err.Error())
	}
	if err := hc.dec.Close(); err != nil {
		return h2.ConnError(h2.CompressionError, err.Error())
	}
	return nil
}

// connectionSpecific are the fields HTTP/2 forbids (RFC 9113 §8.2.2).
var connectionSpecific = [...]string{"connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade"}

// checkField checks a field's name and value (RFC 9113 §8.2.1): names are
// lowercase tokens, values hold no NUL, CR or LF and no whitespace at
// either end.
func checkField(f *hpack.HeaderField) string {
	name := f.Name
	if len(name) == 0 {
		return "empty field name"
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			return "uppercase field name"
		}
		if h1.CharClass[c]&h1.ClassToken == 0 && !(i == 0 && c == ':') {
			return "field name not a token"
		}
	}
	v := f.Value
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == 0 || c == '\r' || c == '\n' {
			return "control character in a field value"
		}
	}
	if len(v) > 0 && (v[0] == ' ' || v[0] == '\t' || v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		return "whitespace around a field value"
	}
	return ""
}

// buildRequest turns the fields of a request's header block into st's
// Request (RFC 9113 §8.3.1), with every byte copied into st's arena.
func (hc *h2Conn) buildRequest(st *h2Stream, endStream bool) *h2.Error {
	var method, path, authority string
	var hasMethod, hasScheme, hasPath, hasAuthority, regular bool
	cl := int64(-1)
	var cookies []string
	a := st.arena[:0]
	type span struct{ ns, ne, vs, ve int }
	sh := hc.ls.h2
	spans := sh.spans[:0]
	for i := range sh.fields {
		f := &sh.fields[i]
		if why := checkField(f); why != "" {
			return errMalformed(st.id, why)
		}
		if f.Name[0] == ':' {
			if regular {
				return errMalformed(st.id, "pseudo-header after a regular field")
			}
			var dup bool
			switch f.Name {
			case ":method":
				dup, hasMethod, method = hasMethod, true, f.Value
			case ":scheme":
				dup, hasScheme = hasScheme, true
			case ":path":
				dup, hasPath, path = hasPath, true, f.Value
			case ":authority":
				dup, hasAuthority, authority = hasAuthority, true, f.Value
			default:
				return errMalformed(st.id, "pseudo-header "+f.Name)
			}
			if dup {
				return errMalformed(st.id, "repeated "+f.Name)
			}
			continue
		}
		regular = true
		for _, cs := range connectionSpecific {
			if f.Name == cs {
				return errMalformed(st.id, "connection-specific field "+f.Name)
			}
		}
		switch f.Name {
		case "te":
			if f.Value != "trailers" {
				return errMalformed(st.id, "te other than trailers")
			}
		case "content-length":
			n, err := strconv.ParseInt(f.Value, 10, 64)
			if err != nil || n < 0 || (cl >= 0 && n != cl) {
				return errMalformed(st.id, "bad content-length")
			}
			cl = n
		case "cookie":
			// Crumbs of one cookie field (RFC 9113 §8.2.3) join into one
			// line for the HTTP/1 view handlers see.
			cookies = append(cookies, f.Value)
			continue
		case "host":
			if !hasAuthority {
				authority, hasAuthority = f.Value, true
			}
		}
		s := span{ns: len(a)}
		a = append(a, f.Name...)
		s.ne, s.vs = len(a), len(a)
		a = append(a, f.Value...)
		s.ve = len(a)
		spans = append(spans, s)
	}
	if !hasMethod || method == "" {
		return errMalformed(st.id, "no :method")
	}
	if method == "CONNECT" {
		if hasScheme || hasPath || !hasAuthority {
			return errMalformed(st.id, "CONNECT needs :authority alone")
		}
	} else if !hasScheme || !hasPath || path == "" {
		return errMalformed(st.id, "no :scheme or :path")
	}
	if len(cookies) > 0 {
		s := span{ns: len(a)}
		a = append(a, "cookie"...)
		s.ne, s.vs = len(a), len(a)
		for i, c := range cookies {
			if i > 0 {
				a = append(a, "; "...)
			}
			a = append(a, c...)
		}
		s.ve = len(a)
		spans = append(spans, s)
	}
	ms := len(a)
	a = append(a, method...)
	ps := len(a)
	a = append(a, path...)
	hs := len(a)
	a = append(a, authority...)
	st.arena = a
	sh.spans = spans[:0]

	r := &st.req
	r.Reset()
	r.Method = a[ms:ps:ps]
	r.Target = a[ps:hs:hs]
	if method == "CONNECT" {
		r.Target = a[hs:len(a):len(a)]
	} else if q := bytes.IndexByte(r.Target, '?'); q >= 0 {
		r.Path = r.Target[:q:q]
		r.Query = r.Target[q+1:]
	} else {
		r.Path = r.Target
	}
	if hasAuthority {
		r.Host = a[hs:len(a):len(a)]
	}
	for _, s := range spans {
		r.Headers = append(r.Headers, HeaderField{Name: a[s.ns:s.ne:s.ne], Value: a[s.vs:s.ve:s.ve]})
	}
	r.ProtoMajor, r.ProtoMinor = 2, 0
	r.ContentLength = cl
	r.streamed = !endStream
	if endStream && cl > 0 {
		return errMalformed(st.id, "content-length without a body")
	}
	for _, f := range r.Headers {
		if string(f.Name) == "expect" && h1.EqualFold(f.Value, "100-continue") {
			r.Expect100 = true
		}
	}
	st.declared = cl
	return nil
}

// checkTrailers checks a trailer block (RFC 9113 §8.1): it ends the
// stream and holds no pseudo-header.
func (hc *h2Conn) checkTrailers(id uint32, endStream bool) *h2.Error {
	if !endStream {
		return errMalformed(id, "trailers without END_STREAM")
	}
	fields := hc.ls.h2.fields
	for i := range fields {
		f := &fields[i]
		if why := checkField(f); why != "" {
			return errMalformed(id, why)
		}
		if f.Name[0] == ':' {
			return errMalformed(id, "pseudo-header in trailers")
		}
	}
	return nil
}

// encodeHead encodes the head of resp (RFC 9113 §8.3.2): :status, Date
// and Server unless the handler set them (an empty value suppresses
// them, as for HTTP/1), the handler's fields with lowercase names and
// without the connection-specific ones, and content-length when cl >= 0.
func (hc *h2Conn) encodeHead(resp *response, status int, cl int64) []byte {
	sh := hc.ls.h2
	sh.encBuf.Reset()
	e := sh.enc
	_ = e.WriteField(hpack.HeaderField{Name: ":status", Value: statusString(status)})
	h := &resp.header
	if h.special&hasDate == 0 {
		_ = e.WriteField(hpack.HeaderField{Name: "date", Value: hc.cs.dateString()})
	}
	if h.special&hasServer == 0 {
		_ = e.WriteField(hpack.HeaderField{Name: "server", Value: DefaultServerName})
	}
	hc.encodeFields(h, false)
	if cl >= 0 {
		_ = e.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.FormatInt(cl, 10)})
	}
	return sh.encBuf.Bytes()
}

// encodeTrailers encodes a trailer block.
func (hc *h2Conn) encodeTrailers(t *ResponseHeader) []byte {
	sh := hc.ls.h2
	sh.encBuf.Reset()
	hc.encodeFields(t, true)
	return sh.encBuf.Bytes()
}

// encodeFields encodes the handler's fields with lowercase names, without
// the connection-specific and framing ones (and, in trailers, without
// Date and Server, which have no place there).
func (hc *h2Conn) encodeFields(h *ResponseHeader, trailers bool) {
	sh := hc.ls.h2
	e := sh.enc
	lower := sh.lower[:0]
fields:
	for i := range h.fields {
		name, value := h.name(i), h.value(i)
		switch specialName(name) {
		case hasFraming:
			continue
		case hasDate, hasServer:
			if len(value) == 0 || trailers {
				continue
			}
		case hasConnection:
			continue
		}
		lower = append(lower[:0], name...)
		for j, c := range lower {
			if 'A' <= c && c <= 'Z' {
				lower[j] = c + 'a' - 'A'
			}
		}
		for _, cs := range connectionSpecific {
			if string(lower) == cs {
				continue fields
			}
		}
		_ = e.WriteField(hpack.HeaderField{Name: string(lower), Value: string(value)})
	}
	sh.lower = lower
}

// statusString is status's decimal text: a constant for the usual ones, so
// that encoding a head does not allocate for it.
func statusString(status int) string {
	switch status {
	case StatusOK:
		return "200"
	case StatusNoContent:
		return "204"
	case StatusPartialContent:
		return "206"
	case StatusNotModified:
		return "304"
	case StatusNotFound:
		return "404"
	}
	return strconv.Itoa(status)
}
