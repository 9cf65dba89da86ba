package client

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseResponseHead(t *testing.T) {
	type want struct {
		status, minor int
		reason        string
		frame         framing
		length        int64
		cl            int64
		keepAlive     bool
		nfields       int
	}
	tests := []struct {
		name    string
		in      string
		headReq bool
		want    want
		err     string // substring of the ProtocolError; "" = ok
		more    bool   // errNeedMore
	}{
		{name: "length", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
			want: want{200, 1, "OK", frameLength, 5, 5, true, 1}},
		{name: "chunked", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
			want: want{200, 1, "OK", frameChunked, 0, -1, true, 1}},
		{name: "chunked case", in: "HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n",
			want: want{200, 1, "OK", frameChunked, 0, -1, true, 1}},
		{name: "close delimited", in: "HTTP/1.1 200 OK\r\n\r\n",
			want: want{200, 1, "OK", frameClose, 0, -1, false, 0}},
		{name: "connection close", in: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
			want: want{200, 1, "OK", frameLength, 0, 0, false, 2}},
		{name: "http10", in: "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
			want: want{200, 0, "OK", frameLength, 0, 0, false, 1}},
		{name: "http10 keep-alive", in: "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n",
			want: want{200, 0, "OK", frameLength, 0, 0, true, 2}},
		{name: "head", in: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", headReq: true,
			want: want{200, 1, "OK", frameNone, 0, 100, true, 1}},
		{name: "204", in: "HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n",
			want: want{204, 1, "No Content", frameNone, 0, 7, true, 1}},
		{name: "304", in: "HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n",
			want: want{304, 1, "Not Modified", frameNone, 0, 7, true, 1}},
		{name: "100", in: "HTTP/1.1 100 Continue\r\n\r\n",
			want: want{100, 1, "Continue", frameNone, 0, -1, true, 0}},
		{name: "101", in: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
			want: want{101, 1, "Switching Protocols", frameNone, 0, -1, false, 1}},
		{name: "empty reason", in: "HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n",
			want: want{200, 1, "", frameLength, 0, 0, true, 1}},
		{name: "no reason no space", in: "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
			want: want{200, 1, "", frameLength, 0, 0, true, 1}},
		{name: "same length twice", in: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n",
			want: want{200, 1, "OK", frameLength, 3, 3, true, 2}},
		{name: "same length list", in: "HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n",
			want: want{200, 1, "OK", frameLength, 3, 3, true, 1}},
		{name: "value ows", in: "HTTP/1.1 200 OK\r\nX-A: \t v \t\r\nContent-Length: 0\r\n\r\n",
			want: want{200, 1, "OK", frameLength, 0, 0, true, 2}},

		{name: "partial", in: "HTTP/1.1 200 OK\r\nContent-Len", more: true},
		{name: "partial cr", in: "HTTP/1.1 200 OK\r\n\r", more: true},
		{name: "empty", in: "", more: true},

		{name: "both framings", in: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", err: "both"},
		{name: "both framings te first", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", err: "both"},
		{name: "differing lengths", in: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", err: "differing"},
		{name: "differing list", in: "HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\n", err: "differing"},
		{name: "bad length", in: "HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n", err: "Content-Length"},
		{name: "empty length", in: "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n", err: "Content-Length"},
		{name: "huge length", in: "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", err: "Content-Length"},
		{name: "gzip te", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", err: "transfer coding"},
		{name: "te twice", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", err: "transfer coding"},
		{name: "te obfuscated", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n\r\n", err: "transfer coding"},
		{name: "te in 1.0", in: "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", err: "1.0"},
		{name: "bare lf", in: "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", err: "bare CR or LF"},
		{name: "bare lf partial", in: "HTTP/1.1 200 OK\nContent-Length: 0\n", err: "bare CR or LF"},
		{name: "bare lf in field", in: "HTTP/1.1 200 OK\r\nA: b\nC: d\r\n\r\n", err: "bare CR or LF"},
		{name: "bare cr", in: "HTTP/1.1 200 OK\r\nA: b\rC: d\r\n\r\n", err: "bare CR or LF"},
		{name: "obs-fold", in: "HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", err: "obs-fold"},
		{name: "space before colon", in: "HTTP/1.1 200 OK\r\nContent-Length : 3\r\n\r\n", err: "field line"},
		{name: "no colon", in: "HTTP/1.1 200 OK\r\nContent-Length\r\n\r\n", err: "field line"},
		{name: "empty name", in: "HTTP/1.1 200 OK\r\n: x\r\n\r\n", err: "field line"},
		{name: "ctl in value", in: "HTTP/1.1 200 OK\r\nA: b\x00c\r\n\r\n", err: "field line"},
		{name: "http2", in: "HTTP/2.0 200 OK\r\n\r\n", err: "status line"},
		{name: "http12", in: "HTTP/1.2 200 OK\r\n\r\n", err: "version"},
		{name: "short status", in: "HTTP/1.1 20 OK\r\n\r\n", err: "status"},
		{name: "status letters", in: "HTTP/1.1 2x0 OK\r\n\r\n", err: "status code"},
		{name: "status 099", in: "HTTP/1.1 099 OK\r\n\r\n", err: "status code"},
		{name: "status glued", in: "HTTP/1.1 2000 OK\r\n\r\n", err: "status line"},
		{name: "garbage", in: "SSH-2.0-OpenSSH_9.0\r\n\r\n", err: "status line"},
		{name: "leading empty line", in: "\r\nHTTP/1.1 200 OK\r\n\r\n", err: "status line"},
		{name: "ctl in reason", in: "HTTP/1.1 200 O\x01K\r\n\r\n", err: "reason"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h ResponseHead
			var p parsedHead
			n, err := parseResponseHead([]byte(tt.in), parseLimits{}, tt.headReq, &h, &p)
			switch {
			case tt.more:
				require.ErrorIs(t, err, errNeedMore)
				return
			case tt.err != "":
				var pe *ProtocolError
				require.True(t, errors.As(err, &pe), "err = %v", err)
				require.Contains(t, pe.Reason, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, strings.Index(tt.in, "\r\n\r\n")+4, n)
			got := want{h.Status, h.Minor, string(h.Reason), p.frame, p.length, h.ContentLength, p.keepAlive, len(h.Fields)}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseResponseHeadLimits(t *testing.T) {
	var h ResponseHead
	var p parsedHead
	big := "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", 200) + "\r\n\r\n"
	_, err := parseResponseHead([]byte(big), parseLimits{maxBytes: 100}, false, &h, &p)
	require.ErrorContains(t, err, "larger than the limit")
	_, err = parseResponseHead([]byte(big[:150]), parseLimits{maxBytes: 100}, false, &h, &p)
	require.ErrorContains(t, err, "larger than the limit")
	_, err = parseResponseHead([]byte(big[:50]), parseLimits{maxBytes: 100}, false, &h, &p)
	require.ErrorIs(t, err, errNeedMore)

	many := "HTTP/1.1 200 OK\r\n" + strings.Repeat("A: b\r\n", 5) + "\r\n"
	_, err = parseResponseHead([]byte(many), parseLimits{maxFields: 4}, false, &h, &p)
	require.ErrorContains(t, err, "too many fields")
	_, err = parseResponseHead([]byte(many), parseLimits{maxFields: 5}, false, &h, &p)
	require.NoError(t, err)
}

// The parser allocates nothing once the fields slice has grown.
func TestParseResponseHeadNoAlloc(t *testing.T) {
	in := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nServer: x\r\n\r\nhello")
	var h ResponseHead
	var p parsedHead
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := parseResponseHead(in, parseLimits{}, false, &h, &p); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

// FuzzParseResponse: the parser never panics, never reads past its input,
// and a head it accepts is self-consistent.
func FuzzParseResponse(f *testing.F) {
	seeds := []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\nA: b\n\n",
		"HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, headReq bool) {
		var h ResponseHead
		var p parsedHead
		n, err := parseResponseHead(in, parseLimits{maxBytes: 1024, maxFields: 16}, headReq, &h, &p)
		if err != nil {
			var pe *ProtocolError
			if err != errNeedMore && !errors.As(err, &pe) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			return
		}
		if n < 4 || n > len(in) || string(in[n-4:n]) != "\r\n\r\n" {
			t.Fatalf("bad head length %d", n)
		}
		if h.Status < 100 || h.Status > 999 || len(h.Fields) > 16 {
			t.Fatalf("bad head %+v", h)
		}
		if p.frame == frameChunked && (h.ContentLength >= 0 && h.Status >= 200 && !headReq) {
			t.Fatal("chunked with a Content-Length")
		}
		if p.frame == frameLength && p.length != h.ContentLength {
			t.Fatal("length mismatch")
		}
		if (headReq || h.Status < 200 || h.Status == 204 || h.Status == 304) && p.frame != frameNone {
			t.Fatal("body where none may be")
		}
		for _, f := range h.Fields {
			for _, c := range f.Value {
				if c == '\r' || c == '\n' {
					t.Fatal("CR or LF in a field value")
				}
			}
		}
	})
}

// FuzzFieldLine: a line plainFieldLine takes (nextFieldLine's fast path)
// is one walkFieldLine takes too, with the same name, value and rest, so
// the response parser is exactly as strict with the fast path.
func FuzzFieldLine(f *testing.F) {
	for _, s := range []string{
		"Server: nginx\r\n", "A:b\r\n", "A:  b\r\n", "A: b \r\n", "A: b\tc\r\n",
		"A: \x80\xff\r\n", "A: b\x7f\r\n", "A: b\rc\r\n", "A : b\r\n", ":b\r\n",
		"Content-Type: application/octet-stream\r\nX", "A:\r\n", "A: b\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ne, vs, ve, n := plainFieldLine(line)
		if n == 0 {
			return
		}
		got, rest, ok := walkFieldLine(line)
		require.True(t, ok, "%q: plainFieldLine takes it, the walk refuses it", line)
		require.Equal(t, line[:ne], got.Name)
		require.Equal(t, line[vs:ve], got.Value)
		require.Equal(t, line[n:], rest)
	})
}
