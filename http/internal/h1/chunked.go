package h1

import "bytes"

// maxChunkLineBytes bounds a chunk-size line including its extensions and
// CRLF.
const maxChunkLineBytes = 4096

// ChunkedDecoder states.
const (
	csSize    = iota // at a chunk-size line
	csData           // inside chunk data
	csDataCR         // expecting the CR after chunk data
	csDataLF         // expecting the LF after chunk data
	csTrailer        // in the trailer section
	csDone           // body complete
)

// A ChunkedDecoder decodes a body in the chunked transfer coding
// (RFC 9112 §7.1) incrementally and without allocating. The zero value is
// ready to use with the default limits; reuse one per connection with
// Reset.
//
// Chunk extensions are validated and ignored. The trailer section is
// validated like a header section and bounded by Limits.MaxHeaderBytes and
// Limits.MaxHeaders; the decoded body is bounded by Limits.MaxBodyBytes.
// A chunk-size line (with extensions) may be at most 4096 bytes.
//
// The decoder never consumes part of a chunk-size line or of the trailer
// section: they stay in the caller's buffer until complete, so the whole
// trailer section is available to [ChunkedDecoder.Trailer] at the end.
type ChunkedDecoder struct {
	// Limits bounds the decoded body and the trailer section.
	Limits Limits

	state     uint8
	remaining int64 // data bytes left in the current chunk
	total     int64 // data bytes decoded so far
	scan      int   // bytes of the pending line/trailer already checked
	nfields   int   // trailer fields seen
	tstart    int   // offset of the trailer section in the final input
	tlen      int   // length of the trailer field lines
}

// Reset prepares d for a new body, keeping its Limits.
func (d *ChunkedDecoder) Reset() {
	*d = ChunkedDecoder{Limits: d.Limits}
}

// Done reports whether the whole body, trailer section included, has been
// decoded.
func (d *ChunkedDecoder) Done() bool { return d.state == csDone }

// Len returns the number of body bytes decoded so far.
func (d *ChunkedDecoder) Len() int64 { return d.total }

// Next decodes from the start of in and returns how many bytes of in it
// consumed and the next run of body data, a subslice of in (no copy). The
// caller must always discard in[:n], whatever else is returned, and pass
// the remaining bytes, extended by newly read ones, to the next call.
//
// Each call returns at most one run of data. err is ErrNeedMore when no
// data could be produced because in ends inside framing or is empty; a
// *[Error] when the body is malformed (status 400), too large (413)
// or has an oversized trailer section (431). done is set, with err nil and
// no data, by the call that consumes the end of the trailer section; later
// calls return done again and consume nothing.
func (d *ChunkedDecoder) Next(in []byte) (n int, data []byte, done bool, err error) {
	return d.next(in, int64(len(in)))
}

// Decode decodes from in into out, as much as both allow, and returns how
// many bytes of in it consumed and how many body bytes it wrote to out.
// The caller keeps in[consumed:] for the next call. out may overlap in if
// it starts at or before in's start (in-place decoding): body bytes are
// never written past the input they were read from.
//
// err is nil unless the input is malformed; done reports the end of the
// body. Decode never returns ErrNeedMore: it stops when in is exhausted or
// out is full.
func (d *ChunkedDecoder) Decode(in, out []byte) (consumed, produced int, done bool, err error) {
	for {
		if d.state == csData && produced == len(out) {
			return consumed, produced, false, nil
		}
		base := consumed
		n, data, fin, err := d.next(in[consumed:], int64(len(out)-produced))
		consumed += n
		produced += copy(out[produced:], data)
		switch {
		case fin:
			if n > 0 {
				d.tstart += base
			}
			return consumed, produced, true, nil
		case err == ErrNeedMore:
			return consumed, produced, false, nil
		case err != nil:
			return consumed, produced, false, err
		}
	}
}

// Trailer returns the trailer field lines, each with its CRLF, without the
// final empty line: a subslice of in, which must be the input given to the
// call that reported done. It is empty when the body had no trailers.
// Iterate over it with [NextField].
func (d *ChunkedDecoder) Trailer(in []byte) []byte {
	if d.state != csDone || d.tstart+d.tlen > len(in) {
		return nil
	}
	return in[d.tstart : d.tstart+d.tlen : d.tstart+d.tlen]
}

func (d *ChunkedDecoder) next(in []byte, maxData int64) (n int, data []byte, done bool, err error) {
	for {
		switch d.state {
		case csSize:
			line := in[n:]
			if len(line) > 0 && CharClass[line[0]]&ClassHex == 0 {
				return n, nil, false, errBadChunkSize
			}
			window := line[:min(len(line), maxChunkLineBytes)]
			i := bytes.IndexByte(window[d.scan:], '\n')
			if i < 0 {
				if len(window) >= maxChunkLineBytes {
					return n, nil, false, errChunkLineTooLong
				}
				d.scan = len(window)
				return n, nil, false, ErrNeedMore
			}
			lf := d.scan + i
			if lf == 0 || line[lf-1] != '\r' {
				return n, nil, false, ErrBareLF
			}
			size, perr := parseChunkLine(line[:lf-1])
			if perr != nil {
				return n, nil, false, perr
			}
			n += lf + 1
			d.scan = 0
			if size == 0 {
				d.state = csTrailer
				continue
			}
			if size > d.Limits.BodyBytes()-d.total {
				return n, nil, false, ErrBodyTooLarge
			}
			d.remaining = size
			d.state = csData

		case csData:
			k := min(int64(len(in)-n), d.remaining, maxData)
			if k <= 0 {
				return n, nil, false, ErrNeedMore
			}
			data = in[n : n+int(k) : n+int(k)]
			n += int(k)
			d.remaining -= k
			d.total += k
			if d.remaining == 0 {
				d.state = csDataCR
			}
			return n, data, false, nil

		case csDataCR, csDataLF:
			if n >= len(in) {
				return n, nil, false, ErrNeedMore
			}
			want := byte('\r')
			if d.state == csDataLF {
				want = '\n'
			}
			if in[n] != want {
				return n, nil, false, errMissingChunkCRLF
			}
			n++
			if d.state == csDataCR {
				d.state = csDataLF
			} else {
				d.state = csSize
			}

		case csTrailer:
			end, terr := d.scanTrailer(in[n:])
			if terr != nil {
				return n, nil, false, terr
			}
			d.tstart = n
			d.tlen = end - 2
			n += end
			d.state = csDone
			return n, nil, true, nil

		case csDone:
			return n, nil, true, nil
		}
	}
}

// scanTrailer validates the field lines of the trailer section at the start
// of sec, resuming at d.scan, and returns the section length including the
// final CRLF.
func (d *ChunkedDecoder) scanTrailer(sec []byte) (int, error) {
	maxBytes := d.Limits.HeaderBytes()
	window := sec[:min(len(sec), maxBytes)]
	for {
		s := d.scan
		i := bytes.IndexByte(window[s:], '\n')
		if i < 0 {
			// Reject a bad line as soon as it is visible.
			if s < len(window) {
				if err := checkFieldLine(window[s:], false); err != nil {
					return 0, err
				}
			}
			if len(window) >= maxBytes {
				return 0, errTrailerTooLarge
			}
			return 0, ErrNeedMore
		}
		lf := s + i
		if lf == s || sec[lf-1] != '\r' {
			return 0, ErrBareLF
		}
		line := sec[s : lf-1]
		if len(line) == 0 {
			return lf + 1, nil
		}
		if err := checkFieldLine(line, true); err != nil {
			return 0, err
		}
		d.nfields++
		if d.nfields > d.Limits.Headers() {
			return 0, ErrTooManyHeaders
		}
		d.scan = lf + 1
	}
}

// checkFieldLine validates a field line without its CRLF. If complete is
// false, line is only a prefix and a trailing CR is allowed.
func checkFieldLine(line []byte, complete bool) error {
	if !complete && len(line) == 1 && line[0] == '\r' {
		return nil
	}
	if line[0] == ' ' || line[0] == '\t' {
		return ErrObsFold
	}
	i := 0
	for i < len(line) && CharClass[line[i]]&ClassToken != 0 {
		i++
	}
	if i == len(line) {
		if complete {
			return ErrBadFieldName
		}
		return nil
	}
	switch line[i] {
	case ':':
	case ' ', '\t':
		return ErrSpaceBeforeColon
	default:
		return ErrBadFieldName
	}
	if i == 0 {
		return ErrBadFieldName
	}
	for i++; i < len(line); i++ {
		if c := line[i]; CharClass[c]&ClassValue == 0 {
			if c == '\r' && !complete && i == len(line)-1 {
				return nil
			}
			if c == '\r' {
				return ErrBareCR
			}
			return ErrBadFieldValue
		}
	}
	return nil
}

// A Field is one field line: a name and a value with surrounding
// whitespace removed. Package http's Field has the same fields.
type Field struct {
	Name  []byte
	Value []byte
}

// NextField splits the first field line off a block of CRLF-terminated
// field lines that has already been validated, such as
// [ChunkedDecoder.Trailer]. It returns the field with the value trimmed,
// the rest of the block, and false when the block is empty.
func NextField(block []byte) (f Field, rest []byte, ok bool) {
	lf := bytes.IndexByte(block, '\n')
	if lf < 1 {
		return Field{}, nil, false
	}
	line := block[:lf-1]
	colon := bytes.IndexByte(line, ':')
	if colon < 0 {
		return Field{}, nil, false
	}
	f.Name = line[:colon:colon]
	v := TrimOWS(line[colon+1:])
	f.Value = v[:len(v):len(v)]
	return f, block[lf+1:], true
}

// parseChunkLine parses chunk-size [ chunk-ext ] (the line without CRLF)
// and returns the size.
func parseChunkLine(line []byte) (int64, error) {
	var size int64
	i := 0
	for ; i < len(line); i++ {
		c := line[i]
		var v byte
		switch {
		case '0' <= c && c <= '9':
			v = c - '0'
		case 'a' <= c && c <= 'f':
			v = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			v = c - 'A' + 10
		default:
			goto ext
		}
		if size > (1<<63-1)>>4 {
			return 0, errChunkSizeOverflow
		}
		size = size<<4 | int64(v)
	}
ext:
	if i == 0 {
		return 0, errBadChunkSize
	}
	// chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] )
	first := true
	for i < len(line) {
		j := skipWS(line, i)
		if j == len(line) || line[j] != ';' {
			if first {
				return 0, errBadChunkSize
			}
			return 0, errBadChunkExt
		}
		first = false
		i = skipWS(line, j+1)
		start := i
		for i < len(line) && IsToken(line[i]) {
			i++
		}
		if i == start {
			return 0, errBadChunkExt
		}
		k := skipWS(line, i)
		if k == len(line) || line[k] != '=' {
			continue
		}
		i = skipWS(line, k+1)
		if i < len(line) && line[i] == '"' {
			end, ok := skipQuoted(line, i)
			if !ok {
				return 0, errBadChunkExt
			}
			i = end
			continue
		}
		start = i
		for i < len(line) && IsToken(line[i]) {
			i++
		}
		if i == start {
			return 0, errBadChunkExt
		}
	}
	return size, nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	return i
}

// skipQuoted returns the offset just past the quoted-string starting at
// b[i] == '"'.
func skipQuoted(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			i++
			if i == len(b) || CharClass[b[i]]&ClassValue == 0 {
				return 0, false
			}
		case CharClass[c]&ClassQdText == 0:
			return 0, false
		}
	}
	return 0, false
}
