package http

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	nethttp "net/http"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/http/internal/h1"
)

// describe renders every observable field of req, for comparisons.
func describe(req *Request) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "method=%q target=%q path=%q query=%q proto=%d.%d host=%q cl=%d chunked=%v close=%v expect100=%v upgrade=%q",
		req.Method, req.Target, req.Path, req.Query, req.ProtoMajor, req.ProtoMinor,
		req.Host, req.ContentLength, req.Chunked, req.Close, req.Expect100, req.Upgrade)
	for _, h := range req.Headers {
		fmt.Fprintf(&sb, " [%q: %q]", h.Name, h.Value)
	}
	if req.Query == nil {
		sb.WriteString(" noquery")
	}
	if req.Host == nil {
		sb.WriteString(" nohost")
	}
	return sb.String()
}

type validCase struct {
	name  string
	in    string // the head, possibly followed by a body
	head  int    // expected n; 0 means len(in)
	noStd bool   // net/http does not accept it (it is more lenient elsewhere)
	check func(t *testing.T, req *Request)
}

var validCases = []validCase{
	{
		name: "minimal GET",
		in:   "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
		check: func(t *testing.T, r *Request) {
			expect(t, "method", string(r.Method), "GET")
			expect(t, "target", string(r.Target), "/")
			expect(t, "path", string(r.Path), "/")
			expect(t, "host", string(r.Host), "example.com")
			expect(t, "proto", fmt.Sprint(r.ProtoMajor, r.ProtoMinor), "1 1")
			expect(t, "cl", r.ContentLength, int64(-1))
			expect(t, "close", r.Close, false)
			expect(t, "body", r.HasBody(), false)
			if r.Query != nil {
				t.Errorf("query = %q, want nil", r.Query)
			}
		},
	},
	{
		name: "query, whitespace, empty and obs-text values",
		in: "GET /search?q=go+lang&x=%20 HTTP/1.1\r\n" +
			"hOsT:   example.com:8080 \t\r\n" +
			"X-Empty:\r\n" +
			"X-Spaces: \t \r\n" +
			"X-Tab: a\tb\r\n" +
			"X-Obs: caf\xc3\xa9\r\n" +
			"X-Dup: 1\r\n" +
			"x-dup: 2\r\n\r\n",
		check: func(t *testing.T, r *Request) {
			expect(t, "path", string(r.Path), "/search")
			expect(t, "query", string(r.Query), "q=go+lang&x=%20")
			expect(t, "host", string(r.Host), "example.com:8080")
			expect(t, "headers", len(r.Headers), 7)
			expect(t, "X-EMPTY", r.Header("X-EMPTY") != nil && len(r.Header("X-EMPTY")) == 0, true)
			expect(t, "X-Spaces", string(r.Header("x-spaces")), "")
			expect(t, "X-Tab", string(r.Header("x-tab")), "a\tb")
			expect(t, "X-Obs", string(r.Header("X-Obs")), "caf\xc3\xa9")
			expect(t, "X-Dup", string(r.Header("X-DUP")), "1")
			expect(t, "missing", r.Header("X-Missing") == nil, true)
			_, ok := r.Lookup("x-missing")
			expect(t, "lookup", ok, false)
		},
	},
	{
		name: "POST with Content-Length",
		in:   "POST /submit HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
		head: len("POST /submit HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n"),
		check: func(t *testing.T, r *Request) {
			expect(t, "cl", r.ContentLength, int64(5))
			expect(t, "body", r.HasBody(), true)
		},
	},
	{
		name: "Content-Length zero",
		in:   "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
		check: func(t *testing.T, r *Request) {
			expect(t, "cl", r.ContentLength, int64(0))
			expect(t, "body", r.HasBody(), false)
		},
	},
	{
		name: "identical duplicate Content-Length",
		in:   "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\ncontent-length: 007\r\nContent-Length: 7, 7\r\n\r\n",
		// net/http rejects repeated Content-Length lines.
		noStd: true,
		check: func(t *testing.T, r *Request) { expect(t, "cl", r.ContentLength, int64(7)) },
	},
	{
		name: "chunked POST",
		in:   "POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		head: len("POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"),
		check: func(t *testing.T, r *Request) {
			expect(t, "chunked", r.Chunked, true)
			expect(t, "cl", r.ContentLength, int64(-1))
			expect(t, "body", r.HasBody(), true)
		},
	},
	{
		name:  "chunked in any case, over two fields",
		in:    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\nTransfer-Encoding: , CHUNKED\r\n\r\n",
		noStd: true,
		check: func(t *testing.T, r *Request) { expect(t, "chunked", r.Chunked, true) },
	},
	{
		name: "HTTP/1.0 closes by default",
		in:   "GET /old HTTP/1.0\r\nUser-Agent: x\r\n\r\n",
		check: func(t *testing.T, r *Request) {
			expect(t, "minor", r.ProtoMinor, 0)
			expect(t, "close", r.Close, true)
			expect(t, "keepalive", r.KeepAlive(), false)
			expect(t, "host", r.Host == nil, true)
		},
	},
	{
		name: "HTTP/1.0 keep-alive",
		in:   "GET / HTTP/1.0\r\nHost: a\r\nConnection: Keep-Alive\r\n\r\n",
		check: func(t *testing.T, r *Request) {
			expect(t, "close", r.Close, false)
			expect(t, "keepalive", r.KeepAlive(), true)
		},
	},
	{
		name: "HTTP/1.0 ignores Expect and Upgrade",
		in:   "GET / HTTP/1.0\r\nExpect: 100-continue\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
		check: func(t *testing.T, r *Request) {
			expect(t, "expect", r.Expect100, false)
			expect(t, "upgrade", r.Upgrade == nil, true)
		},
	},
	{
		name:  "HTTP/1.1 Connection: close",
		in:    "GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, CLOSE\r\n\r\n",
		check: func(t *testing.T, r *Request) { expect(t, "close", r.Close, true) },
	},
	{
		name: "upgrade",
		in:   "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n",
		check: func(t *testing.T, r *Request) {
			expect(t, "upgrade", string(r.Upgrade), "websocket")
			expect(t, "close", r.Close, false)
		},
	},
	{
		name:  "Upgrade without Connection: upgrade is ignored",
		in:    "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n",
		check: func(t *testing.T, r *Request) { expect(t, "upgrade", r.Upgrade == nil, true) },
	},
	{
		name:  "Expect: 100-continue",
		in:    "PUT /f HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 10\r\n\r\n",
		check: func(t *testing.T, r *Request) { expect(t, "expect", r.Expect100, true) },
	},
	{
		name: "absolute-form",
		in:   "GET http://example.com:80/a/b?c=d HTTP/1.1\r\nHost: example.com:80\r\n\r\n",
		check: func(t *testing.T, r *Request) {
			expect(t, "path", string(r.Path), "/a/b")
			expect(t, "query", string(r.Query), "c=d")
		},
	},
	{
		name: "absolute-form without path",
		in:   "GET https://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n",
		check: func(t *testing.T, r *Request) {
			expect(t, "path", string(r.Path), "")
			expect(t, "query", r.Query == nil, true)
		},
	},
	{
		name:  "asterisk-form",
		in:    "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
		check: func(t *testing.T, r *Request) { expect(t, "path", string(r.Path), "*") },
	},
	{
		name: "authority-form",
		in:   "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
		check: func(t *testing.T, r *Request) {
			expect(t, "target", string(r.Target), "example.com:443")
			expect(t, "path", r.Path == nil, true)
		},
	},
	{
		name:  "empty lines before the request-line",
		in:    "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		noStd: true,
		check: func(t *testing.T, r *Request) { expect(t, "method", string(r.Method), "GET") },
	},
	{
		name:  "higher minor version",
		in:    "GET / HTTP/1.7\r\nHost: a\r\n\r\n",
		check: func(t *testing.T, r *Request) { expect(t, "minor", r.ProtoMinor, 7) },
	},
	{
		name: "extension method, empty Host",
		in:   "M-SEARCH~ /x HTTP/1.1\r\nHost:\r\n\r\n",
		check: func(t *testing.T, r *Request) {
			expect(t, "method", string(r.Method), "M-SEARCH~")
			expect(t, "host", r.Host != nil && len(r.Host) == 0, true)
		},
	},
	{
		name: "IPv6 host",
		in:   "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
		check: func(t *testing.T, r *Request) {
			expect(t, "host", string(r.Host), "[::1]:8080")
		},
	},
	{
		name: "browser request",
		in:   chromeRequest,
		check: func(t *testing.T, r *Request) {
			expect(t, "headers", len(r.Headers), 12)
			expect(t, "ua", strings.HasPrefix(string(r.Header("user-agent")), "Mozilla/5.0"), true)
		},
	},
}

func expect[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

const chromeRequest = "GET /static/app.js?v=1234 HTTP/1.1\r\n" +
	"Host: www.example.com\r\n" +
	"Connection: keep-alive\r\n" +
	"sec-ch-ua: \"Chromium\";v=\"124\", \"Google Chrome\";v=\"124\", \"Not-A.Brand\";v=\"99\"\r\n" +
	"sec-ch-ua-mobile: ?0\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36\r\n" +
	"sec-ch-ua-platform: \"Linux\"\r\n" +
	"Accept: */*\r\n" +
	"Sec-Fetch-Site: same-origin\r\n" +
	"Sec-Fetch-Mode: no-cors\r\n" +
	"Referer: https://www.example.com/index.html\r\n" +
	"Accept-Encoding: gzip, deflate, br, zstd\r\n" +
	"Accept-Language: en-US,en;q=0.9\r\n" +
	"\r\n"

func TestParseValid(t *testing.T) {
	for _, tc := range validCases {
		t.Run(tc.name, func(t *testing.T) {
			buf := []byte(tc.in)
			var p parser
			var req Request
			n, err := p.Parse(buf, &req)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := tc.head
			if want == 0 {
				want = len(tc.in)
			}
			if n != want {
				t.Fatalf("n = %d, want %d", n, want)
			}
			tc.check(t, &req)

			// Views are capped: appending must not clobber the buffer.
			before := string(buf)
			_ = append(req.Method, 'X')
			_ = append(req.Target, 'X')
			for _, h := range req.Headers {
				_ = append(h.Name, 'X')
				_ = append(h.Value, 'X')
			}
			if string(buf) != before {
				t.Fatal("appending to a view modified the buffer")
			}

			if tc.noStd {
				return
			}
			sr, err := nethttp.ReadRequest(bufio.NewReader(strings.NewReader(tc.in)))
			if err != nil {
				t.Fatalf("net/http rejects a request we accept: %v", err)
			}
			expect(t, "std method", string(req.Method), sr.Method)
			expect(t, "std target", string(req.Target), sr.RequestURI)
			expect(t, "std close", req.Close, sr.Close)
		})
	}
}

type invalidCase struct {
	name   string
	in     string
	status int
	limits Limits
}

var invalidCases = []invalidCase{
	// request-line
	{name: "method with bad char", in: "G@T / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "empty method", in: " / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "double space", in: "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "tab separator", in: "GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "control char in target", in: "GET /a\x01b HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "DEL in target", in: "GET /a\x7fb HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "non-ASCII in target", in: "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "HTTP/0.9 request-line", in: "GET /\r\n\r\n", status: 400},
	{name: "lower-case version", in: "GET / http/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "two-digit minor", in: "GET / HTTP/1.10\r\nHost: a\r\n\r\n", status: 400},
	{name: "space after version", in: "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", status: 400},
	{name: "version without minor", in: "GET / HTTP/1\r\nHost: a\r\n\r\n", status: 400},
	{name: "HTTP/2.0", in: "GET / HTTP/2.0\r\nHost: a\r\n\r\n", status: 505},
	{name: "HTTP/0.9", in: "GET / HTTP/0.9\r\nHost: a\r\n\r\n", status: 505},
	{name: "asterisk with GET", in: "GET * HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "relative target", in: "GET index.html HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "bad scheme", in: "GET 1http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "CONNECT with path", in: "CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "bare LF after request-line", in: "GET / HTTP/1.1\nHost: a\r\n\r\n", status: 400},
	{name: "bare CR after request-line", in: "GET / HTTP/1.1\rHost: a\r\n\r\n", status: 400},
	{name: "bare LF before request-line", in: "\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "TLS handshake", in: "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", status: 400},

	// field lines
	{name: "obs-fold", in: "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", status: 400},
	{name: "obs-fold with tab", in: "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\tc\r\n\r\n", status: 400},
	{name: "whitespace before first field", in: "GET / HTTP/1.1\r\n Host: a\r\n\r\n", status: 400},
	{name: "space before colon", in: "GET / HTTP/1.1\r\nHost : a\r\n\r\n", status: 400},
	{name: "tab before colon", in: "GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", status: 400},
	{name: "bad char in name", in: "GET / HTTP/1.1\r\nHost: a\r\nX{A}: b\r\n\r\n", status: 400},
	{name: "empty name", in: "GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n", status: 400},
	{name: "no colon", in: "GET / HTTP/1.1\r\nHost: a\r\nX-A\r\n\r\n", status: 400},
	{name: "NUL in value", in: "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x00c\r\n\r\n", status: 400},
	{name: "CTL in value", in: "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x1bc\r\n\r\n", status: 400},
	{name: "DEL in value", in: "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x7fc\r\n\r\n", status: 400},
	{name: "bare CR in value", in: "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\rc\r\n\r\n", status: 400},
	{name: "bare LF in value", in: "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\nc\r\n\r\n", status: 400},
	{name: "bare LF line ends", in: "GET / HTTP/1.1\r\nHost: a\n\n", status: 400},
	{name: "bare CR at end of head", in: "GET / HTTP/1.1\r\nHost: a\r\n\rX", status: 400},

	// Host
	{name: "missing Host", in: "GET / HTTP/1.1\r\nX-A: b\r\n\r\n", status: 400},
	{name: "two Hosts", in: "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", status: 400},
	{name: "two Hosts in HTTP/1.0", in: "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", status: 400},
	// After a Host the flat pass reads a second one as a plain line.
	{name: "second Host after others", in: "GET / HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nhOST:b\r\n\r\n", status: 400},
	{name: "second Host not plain", in: "GET / HTTP/1.1\r\nHost: a\r\nHost:  b \r\n\r\n", status: 400},
	{name: "second Host bad", in: "GET / HTTP/1.1\r\nHost: a\r\nHost: a/b\r\n\r\n", status: 400},
	{name: "second Host empty", in: "GET / HTTP/1.1\r\nHost: a\r\nHost:\r\n\r\n", status: 400},
	{name: "second Host, bad length after", in: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: x\r\n\r\n", status: 400},
	{name: "space in Host", in: "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", status: 400},
	{name: "slash in Host", in: "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", status: 400},
	{name: "control byte for Host's colon", in: "GET / HTTP/1.1\r\nHost\x1aa\r\n\r\n", status: 400},
	{name: "NUL in Host", in: "GET / HTTP/1.1\r\nHost: a\x00b\r\n\r\n", status: 400},
	{name: "bare LF after Host", in: "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", status: 400},
	{name: "Host after a field", in: "GET / HTTP/1.1\r\nX: b\r\nHOST: a\r\nhost: a\r\n\r\n", status: 400},

	// framing
	{name: "CL and TE", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400},
	{name: "TE and CL", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", status: 400},
	{name: "differing CL", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", status: 400},
	{name: "differing CL list", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\n", status: 400},
	{name: "CL not digits", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5a\r\n\r\n", status: 400},
	{name: "CL negative", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", status: 400},
	{name: "CL plus sign", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", status: 400},
	{name: "CL empty", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n", status: 400},
	{name: "CL hex", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n", status: 400},
	{name: "CL inner space", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 0\r\n\r\n", status: 400},
	{name: "CL trailing comma", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5,\r\n\r\n", status: 400},
	{name: "CL overflow", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775808\r\n\r\n", status: 400},
	{name: "CL huge overflow", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n", status: 400},
	{name: "TE gzip only", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", status: 400},
	{name: "TE chunked not last", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", status: 400},
	{name: "TE chunked not last across fields", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n", status: 400},
	{name: "TE chunked twice", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", status: 400},
	{name: "TE empty", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \r\n\r\n", status: 400},
	{name: "TE identity", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", status: 400},
	{name: "TE chunked with parameter", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked;x=1\r\n\r\n", status: 400},
	{name: "TE invalid coding", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: g@zip, chunked\r\n\r\n", status: 400},
	{name: "TE gzip then chunked", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", status: 501},
	{name: "TE in HTTP/1.0", in: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400},
	{name: "unknown expectation", in: "PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue, foo\r\n\r\n", status: 417},

	// limits
	{name: "body too large", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4194305\r\n\r\n", status: 413},
	{name: "body too large, custom", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n", status: 413, limits: Limits{MaxBodyBytes: 10}},
	{name: "target too long", in: "GET /" + strings.Repeat("a", 8192) + " HTTP/1.1\r\nHost: a\r\n\r\n", status: 414},
	{name: "target too long, custom", in: "GET /12345678 HTTP/1.1\r\nHost: a\r\n\r\n", status: 414, limits: Limits{MaxTargetBytes: 8}},
	{name: "head too large", in: "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("b", 16384) + "\r\n\r\n", status: 431},
	{name: "head too large, custom", in: "GET / HTTP/1.1\r\nHost: a\r\n\r\n", status: 431, limits: Limits{MaxHeaderBytes: 26}},
	{name: "too many fields", in: "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-A: b\r\n", 100) + "\r\n", status: 431},
	{name: "too many fields, custom", in: "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\nX-A: c\r\n\r\n", status: 431, limits: Limits{MaxHeaders: 2}},
	{name: "endless empty lines", in: strings.Repeat("\r\n", 9000), status: 431},
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range invalidCases {
		t.Run(tc.name, func(t *testing.T) {
			p := parser{Limits: h1.Limits(tc.limits)}
			var req Request
			n, err := p.Parse([]byte(tc.in), &req)
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse = %d, %v; want a ProtocolError", n, err)
			}
			if pe.Status != tc.status {
				t.Fatalf("status = %d (%v), want %d", pe.Status, err, tc.status)
			}
			if n != 0 {
				t.Errorf("n = %d on error", n)
			}
			if ErrorStatus(err) != tc.status {
				t.Errorf("ErrorStatus = %d", ErrorStatus(err))
			}
			// The parser is reset and usable again.
			p.Limits = h1.Limits{}
			if _, err := p.Parse([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), &req); err != nil {
				t.Fatalf("Parse after error: %v", err)
			}
		})
	}
}

func TestParseLimitBoundaries(t *testing.T) {
	head := "GET /1234 HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\r\n"
	ok := []Limits{
		{MaxHeaderBytes: len(head)},
		{MaxTargetBytes: len("/1234")},
		{MaxHeaders: 2},
	}
	for _, l := range ok {
		p := parser{Limits: h1.Limits(l)}
		var req Request
		if n, err := p.Parse([]byte(head), &req); err != nil || n != len(head) {
			t.Errorf("limits %+v: Parse = %d, %v", l, n, err)
		}
	}
	p := parser{Limits: h1.Limits(Limits{MaxHeaderBytes: len(head) - 1})}
	var req Request
	if _, err := p.Parse([]byte(head), &req); !errors.Is(err, ErrHeaderTooLarge) {
		t.Errorf("one byte over MaxHeaderBytes: %v", err)
	}
	p = parser{Limits: h1.Limits(Limits{MaxBodyBytes: 5})}
	if _, err := p.Parse([]byte("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n"), &req); err != nil {
		t.Errorf("Content-Length at MaxBodyBytes: %v", err)
	}
}

func TestErrorsIs(t *testing.T) {
	tests := []struct {
		err      error
		sentinel error
	}{
		{errObsFold, ErrBadRequest},
		{errHeadTooLarge, ErrHeaderTooLarge},
		{errTooManyHeaders, ErrHeaderTooLarge},
		{errTargetTooLong, ErrURITooLong},
		{errBodyTooLarge, ErrBodyTooLarge},
		{errTEUnsupported, ErrNotImplemented},
		{errVersion, ErrVersionNotSupported},
		{errExpectation, ErrExpectationFailed},
		{fmt.Errorf("wrapped: %w", errBareCR), ErrBadRequest},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.sentinel) {
			t.Errorf("errors.Is(%v, %v) = false", tt.err, tt.sentinel)
		}
	}
	if errors.Is(errObsFold, ErrHeaderTooLarge) {
		t.Error("a 400 matches ErrHeaderTooLarge")
	}
	if errors.Is(ErrBadRequest, errObsFold) {
		t.Error("the sentinel matches a specific error")
	}
	if got := errObsFold.Error(); got != "http: 400 Bad Request: obsolete line folding" {
		t.Errorf("Error() = %q", got)
	}
	expect(t, "ErrorStatus(wrapped)", ErrorStatus(fmt.Errorf("x: %w", errVersion)), 505)
	expect(t, "ErrorStatus(other)", ErrorStatus(errors.New("x")), 500)
	expect(t, "ErrorStatus(nil)", ErrorStatus(nil), 0)
	expect(t, "ErrorStatus(need more)", ErrorStatus(h1.ErrNeedMore), 0)
}

// parseSplit feeds the prefixes of in to one parser, each in a freshly
// allocated buffer (as if the accumulated input moved), and checks that
// every prefix shorter than the result yields ErrNeedMore or, for invalid
// input, the final error.
func parseSplit(t *testing.T, p *parser, in string) (n int, desc string, err error) {
	t.Helper()
	var req Request
	for k := 0; k <= len(in); k++ {
		buf := []byte(in[:k])
		n, err = p.Parse(buf, &req)
		if err == h1.ErrNeedMore {
			continue
		}
		if err == nil {
			return n, describe(&req), nil
		}
		return 0, "", err
	}
	return 0, "", h1.ErrNeedMore
}

func TestParseSplitAtEveryByte(t *testing.T) {
	for _, tc := range validCases {
		t.Run(tc.name, func(t *testing.T) {
			var whole parser
			var req Request
			wantN, err := whole.Parse([]byte(tc.in), &req)
			if err != nil {
				t.Fatal(err)
			}
			want := describe(&req)
			var p parser
			n, got, err := parseSplit(t, &p, tc.in)
			if err != nil || n != wantN || got != want {
				t.Fatalf("split parse = %d, %v\n%s\nwant %d\n%s", n, err, got, wantN, want)
			}
		})
	}
	for _, tc := range invalidCases {
		t.Run(tc.name, func(t *testing.T) {
			whole := parser{Limits: h1.Limits(tc.limits)}
			var req Request
			_, wantErr := whole.Parse([]byte(tc.in), &req)
			p := parser{Limits: h1.Limits(tc.limits)}
			_, _, err := parseSplit(t, &p, tc.in)
			if err != wantErr {
				t.Fatalf("split parse error %v, whole parse %v", err, wantErr)
			}
		})
	}
}

func TestParseNeedMore(t *testing.T) {
	var p parser
	var req Request
	for _, in := range []string{"", "\r", "\r\n", "G", "GET", "GET /", "GET / HTTP/1.", "GET / HTTP/1.1\r",
		"GET / HTTP/1.1\r\nHost: a", "GET / HTTP/1.1\r\nHost: a\r\n", "GET / HTTP/1.1\r\nHost: a\r\n\r"} {
		p.Reset()
		if n, err := p.Parse([]byte(in), &req); err != h1.ErrNeedMore || n != 0 {
			t.Errorf("Parse(%q) = %d, %v; want ErrNeedMore", in, n, err)
		}
	}
	// A shorter buffer than last time restarts the parse.
	p.Reset()
	p.Parse([]byte("GET / HTTP/1.1\r\nHost: a\r\n"), &req)
	if n, err := p.Parse([]byte("GET /x HTTP/1.1\r\nHost: b\r\n\r\n")[:5], &req); err != h1.ErrNeedMore || n != 0 {
		t.Errorf("after shrink: %d, %v", n, err)
	}
}

func TestParsePipelined(t *testing.T) {
	reqs := []string{
		"GET /1 HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n",
		"body",
		"\r\n", // a stray CRLF after a body is tolerated
		"POST /3 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
		"3\r\nabc\r\n0\r\n\r\n",
		"GET /4 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
	}
	buf := []byte(strings.Join(reqs, ""))
	var p parser
	var req Request
	var dec h1.ChunkedDecoder
	var paths []string
	var bodies []string
	for len(buf) > 0 {
		n, err := p.Parse(buf, &req)
		if err != nil {
			t.Fatalf("Parse at %q: %v", buf, err)
		}
		paths = append(paths, string(req.Path))
		buf = buf[n:]
		switch {
		case req.Chunked:
			dec.Reset()
			var body []byte
			for !dec.Done() {
				n, data, _, err := dec.Next(buf)
				if err != nil {
					t.Fatalf("chunked: %v", err)
				}
				body = append(body, data...)
				buf = buf[n:]
			}
			bodies = append(bodies, string(body))
		case req.ContentLength > 0:
			bodies = append(bodies, string(buf[:req.ContentLength]))
			buf = buf[req.ContentLength:]
		}
		if req.Close {
			break
		}
	}
	expect(t, "paths", strings.Join(paths, ","), "/1,/2,/3,/4")
	expect(t, "bodies", strings.Join(bodies, ","), "body,abc")
	expect(t, "rest", len(buf), 0)
	expect(t, "last close", req.Close, true)
}

func TestRequestReuse(t *testing.T) {
	var p parser
	var req Request
	if _, err := p.Parse([]byte("POST /a?b HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"), &req); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse([]byte("GET / HTTP/1.1\r\nHost: b\r\n\r\n"), &req); err != nil {
		t.Fatal(err)
	}
	expect(t, "cl", req.ContentLength, int64(-1))
	expect(t, "expect", req.Expect100, false)
	expect(t, "close", req.Close, false)
	expect(t, "query", req.Query == nil, true)
	expect(t, "headers", len(req.Headers), 1)
}

// TestParseResetsEveryField fills every field of a Request with junk and
// parses into it: the result must equal a parse into a zero Request. fill
// assigns the fields one by one, so a field added to Request without a
// line there fails here.
func TestParseResetsEveryField(t *testing.T) {
	in := []byte("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	var p parser
	var want Request
	if _, err := p.Parse(in, &want); err != nil {
		t.Fatal(err)
	}
	var got Request
	v := reflect.ValueOf(&got).Elem()
	junk := []byte("junk")
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if !f.CanSet() {
			// Unexported: reflect refuses to set it, so the test writes
			// through its address; the field is addressable (got is a
			// variable) and the value set has the field's own type.
			f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
		}
		switch f.Kind() {
		case reflect.Slice:
			if f.Type() == reflect.TypeOf(junk) {
				f.Set(reflect.ValueOf(junk))
			}
		case reflect.Int, reflect.Int64:
			f.SetInt(7)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.String:
			f.SetString("junk")
		case reflect.Array:
			// the router's parameters: emptied through nparams
		default:
			t.Fatalf("field %s of kind %s: teach this test to fill it", v.Type().Field(i).Name, f.Kind())
		}
	}
	if _, err := p.Parse(in, &got); err != nil {
		t.Fatal(err)
	}
	got.params = want.params
	require.Equal(t, want, got)
}

func TestParseManyHeadersGrows(t *testing.T) {
	in := "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-A: b\r\n", 99) + "\r\n"
	p := parser{Limits: h1.Limits(Limits{MaxHeaders: 100})}
	var req Request
	if _, err := p.Parse([]byte(in), &req); err != nil {
		t.Fatal(err)
	}
	expect(t, "headers", len(req.Headers), 100)
}

func TestParseAllocs(t *testing.T) {
	buf := []byte(chromeRequest)
	var p parser
	var req Request
	p.Parse(buf, &req)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := p.Parse(buf, &req); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(req.Header("accept"), []byte("*/*")) {
			t.Fatal("accept")
		}
	})
	if allocs != 0 {
		t.Errorf("Parse allocates %v times", allocs)
	}
	allocs = testing.AllocsPerRun(100, func() {
		p.Parse(buf[:len(buf)/2], &req)
		p.Parse(buf, &req)
	})
	if allocs != 0 {
		t.Errorf("incremental Parse allocates %v times", allocs)
	}
	// A connection's parser holds no memory of its own for heads that
	// arrive whole: a fresh one per head, with the loop's Request,
	// allocates nothing.
	allocs = testing.AllocsPerRun(100, func() {
		var fresh parser
		if _, err := fresh.Parse(buf, &req); err != nil || cap(fresh.spans) != 0 {
			t.Fatal(err, cap(fresh.spans))
		}
	})
	if allocs != 0 {
		t.Errorf("a fresh parser allocates %v times", allocs)
	}
}

func TestParseResumeWithOtherRequest(t *testing.T) {
	in := chromeRequest
	var whole parser
	var want Request
	if _, err := whole.Parse([]byte(in), &want); err != nil {
		t.Fatal(err)
	}
	var p parser
	cuts := []int{40, 200, 201, 350, len(in) - 1}
	for _, k := range cuts {
		var fresh Request
		if _, err := p.Parse([]byte(in[:k]), &fresh); err != h1.ErrNeedMore {
			t.Fatalf("prefix %d: %v", k, err)
		}
	}
	var got Request
	got.Headers = make([]HeaderField, 3) // stale contents must not leak
	if _, err := p.Parse([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	if describe(&got) != describe(&want) {
		t.Fatalf("got\n%s\nwant\n%s", describe(&got), describe(&want))
	}
}
