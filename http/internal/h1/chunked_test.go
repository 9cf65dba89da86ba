package h1

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// decodeAll runs Next over in, all at once, and returns the body, the
// trailer section and the number of bytes consumed.
func decodeAll(d *ChunkedDecoder, in []byte) (body, trailer []byte, n int, err error) {
	for {
		k, data, done, err := d.Next(in[n:])
		body = append(body, data...)
		if done {
			trailer = d.Trailer(in[n:])
			n += k
			return body, trailer, n, nil
		}
		n += k
		if err != nil {
			return body, nil, n, err
		}
	}
}

var chunkedValid = []struct {
	name    string
	in      string
	body    string
	trailer string
	extra   string // bytes after the body, left unconsumed
}{
	{name: "empty body", in: "0\r\n\r\n"},
	{name: "one chunk", in: "5\r\nhello\r\n0\r\n\r\n", body: "hello"},
	{name: "several chunks", in: "5\r\nhello\r\n1\r\n,\r\n6\r\n world\r\n0\r\n\r\n", body: "hello, world"},
	{name: "hex sizes", in: "a\r\n0123456789\r\nB\r\nabcdefghijk\r\n0\r\n\r\n", body: "0123456789abcdefghijk"},
	{name: "leading zeros", in: "0005\r\nhello\r\n000\r\n\r\n", body: "hello"},
	{name: "binary data", in: "4\r\n\r\n\x00\xff\r\n0\r\n\r\n", body: "\r\n\x00\xff"},
	{
		name: "extensions",
		in:   "5;name=value\r\nhello\r\n3 ; a ; b = \"q\\\"uoted; x\" ;c=d\r\nabc\r\n0;last\r\n\r\n",
		body: "helloabc",
	},
	{
		name:    "trailers",
		in:      "3\r\nabc\r\n0\r\nX-Checksum: 1234\r\nX-Other:  v \r\n\r\n",
		body:    "abc",
		trailer: "X-Checksum: 1234\r\nX-Other:  v \r\n",
	},
	{
		name:  "pipelined request follows",
		in:    "3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n",
		body:  "abc",
		extra: "GET / HTTP/1.1\r\n",
	},
}

func TestChunkedValid(t *testing.T) {
	for _, tc := range chunkedValid {
		t.Run(tc.name, func(t *testing.T) {
			var d ChunkedDecoder
			in := []byte(tc.in)
			body, trailer, n, err := decodeAll(&d, in)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			expect(t, "body", string(body), tc.body)
			expect(t, "trailer", string(trailer), tc.trailer)
			expect(t, "rest", string(in[n:]), tc.extra)
			expect(t, "done", d.Done(), true)
			expect(t, "len", d.Len(), int64(len(tc.body)))

			// Done is sticky and consumes nothing.
			k, data, done, err := d.Next([]byte("garbage"))
			if k != 0 || data != nil || !done || err != nil {
				t.Errorf("Next after done = %d, %q, %v, %v", k, data, done, err)
			}
		})
	}
}

func TestChunkedTrailerFields(t *testing.T) {
	var d ChunkedDecoder
	_, trailer, _, err := decodeAll(&d, []byte("0\r\nX-A: 1\r\nx-b:\t two  \r\nX-C:\r\n\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for f, rest, ok := NextField(trailer); ok; f, rest, ok = NextField(rest) {
		got = append(got, string(f.Name)+"="+string(f.Value))
	}
	expect(t, "fields", strings.Join(got, ","), "X-A=1,x-b=two,X-C=")
}

var chunkedInvalid = []struct {
	name   string
	in     string
	status int
	limits Limits
}{
	{name: "empty size", in: "\r\nabc\r\n0\r\n\r\n", status: 400},
	{name: "non-hex size", in: "g\r\n", status: 400},
	{name: "size with trailing garbage", in: "5x\r\nhello\r\n", status: 400},
	{name: "negative size", in: "-5\r\nhello\r\n", status: 400},
	{name: "size with 0x", in: "0x5\r\nhello\r\n", status: 400},
	{name: "space before size", in: " 5\r\nhello\r\n", status: 400},
	{name: "trailing space after size", in: "5 \r\nhello\r\n", status: 400},
	{name: "overflow", in: "10000000000000000\r\n", status: 400},
	{name: "overflow, many digits", in: "fffffffffffffffff\r\n", status: 400},
	{name: "size line bare LF", in: "5\nhello\r\n", status: 400},
	{name: "size line bare CR", in: "5\rhello\r\n0\r\n\r\n", status: 400},
	{name: "missing CRLF after data", in: "5\r\nhelloX\r\n", status: 400},
	{name: "LF only after data", in: "5\r\nhello\n0\r\n\r\n", status: 400},
	{name: "CR only after data", in: "5\r\nhello\rX", status: 400},
	{name: "data longer than size", in: "3\r\nhello\r\n", status: 400},
	{name: "ext without name", in: "5;\r\nhello\r\n", status: 400},
	{name: "ext without value", in: "5;a=\r\nhello\r\n", status: 400},
	{name: "ext bad name", in: "5;a@b\r\nhello\r\n", status: 400},
	{name: "ext unterminated quote", in: "5;a=\"b\r\nhello\r\n", status: 400},
	{name: "ext control char in quote", in: "5;a=\"b\x01\"\r\nhello\r\n", status: 400},
	{name: "ext without semicolon", in: "5 a\r\nhello\r\n", status: 400},
	{name: "ext trailing space", in: "5;a \r\nhello\r\n", status: 400},
	{name: "size line too long", in: "5;a=" + strings.Repeat("b", 5000) + "\r\n", status: 400},
	{name: "trailer obs-fold", in: "0\r\nX-A: 1\r\n 2\r\n\r\n", status: 400},
	{name: "trailer space before colon", in: "0\r\nX-A : 1\r\n\r\n", status: 400},
	{name: "trailer without colon", in: "0\r\nX-A\r\n\r\n", status: 400},
	{name: "trailer NUL", in: "0\r\nX-A: \x00\r\n\r\n", status: 400},
	{name: "trailer bare CR", in: "0\r\nX-A: a\rb\r\n\r\n", status: 400},
	{name: "trailer bare LF", in: "0\r\nX-A: a\n\r\n", status: 400},
	{name: "final bare LF", in: "0\r\n\n", status: 400},
	{name: "body too large", in: "5\r\nhello\r\n6\r\nhello!\r\n0\r\n\r\n", status: 413, limits: Limits{MaxBodyBytes: 10}},
	{name: "body too large, default", in: "400001\r\n", status: 413},
	{name: "trailer too large", in: "0\r\nX-A: " + strings.Repeat("a", 100) + "\r\n\r\n", status: 431, limits: Limits{MaxHeaderBytes: 64}},
	{name: "too many trailers", in: "0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", status: 431, limits: Limits{MaxHeaders: 2}},
}

func TestChunkedInvalid(t *testing.T) {
	for _, tc := range chunkedInvalid {
		t.Run(tc.name, func(t *testing.T) {
			d := ChunkedDecoder{Limits: tc.limits}
			_, _, _, err := decodeAll(&d, []byte(tc.in))
			var pe *Error
			if !errors.As(err, &pe) || pe.Status != tc.status {
				t.Fatalf("err = %v, want status %d", err, tc.status)
			}
		})
	}
}

func TestChunkedLimitBoundaries(t *testing.T) {
	in := "5\r\nhello\r\n5\r\nworld\r\n0\r\nX-A: 1\r\n\r\n"
	d := ChunkedDecoder{Limits: Limits{MaxBodyBytes: 10, MaxHeaderBytes: len("X-A: 1\r\n\r\n"), MaxHeaders: 1}}
	body, _, _, err := decodeAll(&d, []byte(in))
	if err != nil || string(body) != "helloworld" {
		t.Fatalf("at the limits: %q, %v", body, err)
	}
	d = ChunkedDecoder{Limits: Limits{MaxHeaderBytes: len("X-A: 1\r\n\r\n") - 1}}
	if _, _, _, err := decodeAll(&d, []byte(in)); statusOf(err) != 431 {
		t.Fatalf("one byte over: %v", err)
	}
}

// decodeSplit feeds in to a decoder piece by piece the way a server does:
// it keeps the unconsumed bytes and appends the next piece, here one byte
// at a time.
func decodeSplit(d *ChunkedDecoder, in []byte) (body, trailer []byte, err error) {
	var pending []byte
	for i := 0; i < len(in); i++ {
		pending = append(pending, in[i])
		for {
			n, data, done, err := d.Next(pending)
			body = append(body, data...)
			if done {
				return body, append([]byte(nil), d.Trailer(pending)...), nil
			}
			pending = append(pending[:0], pending[n:]...)
			if err == ErrNeedMore {
				break
			}
			if err != nil {
				return body, nil, err
			}
		}
	}
	return body, nil, ErrNeedMore
}

func TestChunkedSplitAtEveryByte(t *testing.T) {
	for _, tc := range chunkedValid {
		t.Run(tc.name, func(t *testing.T) {
			var d ChunkedDecoder
			body, trailer, err := decodeSplit(&d, []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			expect(t, "body", string(body), tc.body)
			expect(t, "trailer", string(trailer), tc.trailer)
		})
	}
	for _, tc := range chunkedInvalid {
		t.Run(tc.name, func(t *testing.T) {
			whole := ChunkedDecoder{Limits: tc.limits}
			_, _, _, wantErr := decodeAll(&whole, []byte(tc.in))
			d := ChunkedDecoder{Limits: tc.limits}
			_, _, err := decodeSplit(&d, []byte(tc.in))
			if statusOf(err) != statusOf(wantErr) {
				t.Fatalf("split: %v, whole: %v", err, wantErr)
			}
		})
	}
}

func TestChunkedDecodeInPlace(t *testing.T) {
	for _, tc := range chunkedValid {
		t.Run(tc.name, func(t *testing.T) {
			var d ChunkedDecoder
			buf := []byte(tc.in)
			consumed, produced, done, err := d.Decode(buf, buf)
			if err != nil || !done {
				t.Fatalf("Decode = %d, %d, %v, %v", consumed, produced, done, err)
			}
			expect(t, "body", string(buf[:produced]), tc.body)
			expect(t, "rest", string(buf[consumed:]), tc.extra)
			expect(t, "trailer", string(d.Trailer(buf)), tc.trailer)
		})
	}
}

func TestChunkedDecodeSmallOut(t *testing.T) {
	in := []byte("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
	for size := 1; size <= 12; size++ {
		var d ChunkedDecoder
		var body []byte
		out := make([]byte, size)
		rest := in
		for i := 0; ; i++ {
			if i > 100 {
				t.Fatalf("out=%d: no progress", size)
			}
			c, p, done, err := d.Decode(rest, out)
			if err != nil {
				t.Fatalf("out=%d: %v", size, err)
			}
			body = append(body, out[:p]...)
			rest = rest[c:]
			if done {
				break
			}
		}
		if string(body) != "hello world" || len(rest) != 0 {
			t.Fatalf("out=%d: body %q, rest %q", size, body, rest)
		}
	}
}

func TestChunkedDecodeIncremental(t *testing.T) {
	// Decode with input arriving in 3-byte pieces, compacting in place.
	src := []byte("5;x=1\r\nhello\r\n6\r\n world\r\n0\r\nT: v\r\n\r\n")
	var d ChunkedDecoder
	buf := make([]byte, 0, 64)
	var body []byte
	done := false
	for off := 0; !done; off += 3 {
		if off >= len(src) {
			t.Fatal("ran out of input")
		}
		buf = append(buf, src[off:min(off+3, len(src))]...)
		c, p, fin, err := d.Decode(buf, buf)
		if err != nil {
			t.Fatal(err)
		}
		if fin {
			expect(t, "trailer", string(d.Trailer(buf)), "T: v\r\n")
		}
		body = append(body, buf[:p]...)
		buf = append(buf[:0], buf[c:]...)
		done = fin
	}
	expect(t, "body", string(body), "hello world")
}

func TestChunkedNeedMore(t *testing.T) {
	var d ChunkedDecoder
	n, data, done, err := d.Next(nil)
	if n != 0 || data != nil || done || err != ErrNeedMore {
		t.Fatalf("Next(nil) = %d, %q, %v, %v", n, data, done, err)
	}
	// Framing is consumed even when no data follows yet.
	n, data, done, err = d.Next([]byte("5\r\n"))
	if n != 3 || data != nil || done || err != ErrNeedMore {
		t.Fatalf("Next(size line) = %d, %q, %v, %v", n, data, done, err)
	}
	// Data is returned as a view.
	in := []byte("hel")
	n, data, _, err = d.Next(in)
	if n != 3 || err != nil || &data[0] != &in[0] {
		t.Fatalf("Next(data) = %d, %q, %v (copied?)", n, data, err)
	}
}

func TestChunkedReset(t *testing.T) {
	d := ChunkedDecoder{Limits: Limits{MaxBodyBytes: 100}}
	decodeAll(&d, []byte("3\r\nabc\r\n0\r\n\r\n"))
	d.Reset()
	expect(t, "done", d.Done(), false)
	expect(t, "len", d.Len(), int64(0))
	expect(t, "limits kept", d.Limits.MaxBodyBytes, int64(100))
	body, _, _, err := decodeAll(&d, []byte("2\r\nxy\r\n0\r\n\r\n"))
	if err != nil || string(body) != "xy" {
		t.Fatalf("after Reset: %q, %v", body, err)
	}
}

func TestChunkedAllocs(t *testing.T) {
	in := []byte(strings.Repeat("10\r\n0123456789abcdef\r\n", 8) + "0\r\nX: y\r\n\r\n")
	out := make([]byte, len(in))
	var d ChunkedDecoder
	allocs := testing.AllocsPerRun(100, func() {
		d.Reset()
		_, p, done, err := d.Decode(in, out)
		if err != nil || !done || p != 128 {
			t.Fatal(p, done, err)
		}
	})
	if allocs != 0 {
		t.Errorf("Decode allocates %v times", allocs)
	}
}

func TestChunkRoundTrip(t *testing.T) {
	var enc []byte
	parts := []string{"a", "", strings.Repeat("x", 300), "hello\r\n"}
	for _, p := range parts {
		enc = AppendChunk(enc, []byte(p))
	}
	enc = AppendLastChunk(enc)
	var d ChunkedDecoder
	body, _, n, err := decodeAll(&d, enc)
	if err != nil || n != len(enc) || !bytes.Equal(body, []byte(strings.Join(parts, ""))) {
		t.Fatalf("round trip: %q, %d, %v", body, n, err)
	}
	if got := string(AppendChunkHeader(nil, 300)); got != "12c\r\n" {
		t.Errorf("AppendChunkHeader = %q", got)
	}
}
