package http

import (
	"bufio"
	"bytes"
	"io"
	nethttp "net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/http/internal/checked"
	"github.com/veloq/veloq/http/internal/h1"
)

// TestTimeFormat: the layout is net/http's (RFC 9110 §5.6.7), which
// h1.DateCache writes.
func TestTimeFormat(t *testing.T) {
	if TimeFormat != nethttp.TimeFormat {
		t.Errorf("TimeFormat = %q", TimeFormat)
	}
}

// TestResponseHeaderRepeatedPair: the pair last added clean is copied
// without its checks (addString) however it comes back: again after a
// Reset, into a full arena, as the same bytes at another address or a
// prefix at the same address, and a special one keeps its bit.
func TestResponseHeaderRepeatedPair(t *testing.T) {
	var h ResponseHeader
	long := "text/plain; charset=utf-8"
	for i := 0; i < 3; i++ {
		h.Reset()
		h.Set("Content-Type", long)
		h.Set("Content-Type", long)
		expect(t, "replaced", h.Len(), 1)
		h.Add("Content-Type", long[:10]) // same address, shorter
		h.Add("Content-Type", strings.Clone(long))
		expect(t, "added", h.Len(), 3)
		expect(t, "prefix", string(h.value(1)), "text/plain")
		expect(t, "clone", string(h.value(2)), long)
	}
	h.Reset()
	h.arena = h.arena[:0:0] // no room: the pair takes the checked path
	h.Add("Content-Type", long[:10])
	h.Add("Content-Type", long[:10])
	expect(t, "full arena", string(h.value(1)), "text/plain")
	h.Reset()
	h.Add("Server", "x")
	h.Reset()
	h.Add("Server", "x")
	expect(t, "special bit", h.special, uint8(hasServer))
}

// TestResponseHeaderPairKept: the pair a response starts with is not
// copied again when the arena's head still holds it from the last
// response, and is whenever those bytes were overwritten or handed out
// since: through Get or Fields, or by another field written there.
func TestResponseHeaderPairKept(t *testing.T) {
	const name, value = "Content-Type", "text/plain"
	steps := []struct {
		what string
		set  func(h *ResponseHeader)
	}{
		{"the pair", func(h *ResponseHeader) { h.Set(name, value) }},
		{"changed through Get", func(h *ResponseHeader) { h.Set(name, value); h.Get(name)[0] = 'T' }},
		{"the pair", func(h *ResponseHeader) { h.Set(name, value) }},
		{"changed through Fields", func(h *ResponseHeader) { h.Set(name, value); h.Fields()[0].Value[1] = 'E' }},
		{"the pair", func(h *ResponseHeader) { h.Set(name, value) }},
		{"another field first", func(h *ResponseHeader) { h.Add("X-Long-Name", "0123456789abcdef") }},
		{"the pair", func(h *ResponseHeader) { h.Set(name, value) }},
		{"a checked field first", func(h *ResponseHeader) { h.addChecked([]byte("X-Other-Name"), []byte("zzzzzzzzzz")) }},
		{"the pair", func(h *ResponseHeader) { h.Set(name, value) }},
		{"as bytes first", func(h *ResponseHeader) { h.AddBytes([]byte("Content-Typo"), []byte("text/plaim")) }},
		{"the pair", func(h *ResponseHeader) { h.Set(name, value) }},
		{"the pair twice", func(h *ResponseHeader) { h.Set(name, value); h.Add(name, value) }},
		{"the pair", func(h *ResponseHeader) { h.Set(name, value) }},
	}
	var h, fresh ResponseHeader
	for _, st := range steps {
		h.Reset()
		st.set(&h)
		fresh = ResponseHeader{}
		st.set(&fresh)
		require.Equal(t, string(fresh.arena), string(h.arena), st.what)
	}
}

func TestResponseHeader(t *testing.T) {
	var h ResponseHeader
	h.Add("X-A", "1")
	h.Add("x-a", "2")
	h.AddBytes([]byte("X-B"), []byte(" padded\t"))
	h.Add("Bad Name", "dropped")
	h.Add("", "dropped")
	h.Add("X-Inject", "a\r\nSet-Cookie: evil\x00")
	expect(t, "len", h.Len(), 4)
	expect(t, "get", string(h.Get("X-A")), "1")
	expect(t, "trimmed", string(h.Get("x-b")), "padded")
	expect(t, "sanitized", string(h.Get("X-Inject")), "a  Set-Cookie: evil")
	h.Set("X-A", "3")
	expect(t, "after set", h.Len(), 3)
	expect(t, "set value", string(h.Get("X-A")), "3")
	h.SetBytes([]byte("X-C"), []byte("c"))
	h.Del("X-B")
	expect(t, "has deleted", h.Has("X-B"), false)
	var names []string
	for _, f := range h.Fields() {
		names = append(names, string(f.Name)+"="+string(f.Value))
	}
	expect(t, "order", strings.Join(names, ","), "X-Inject=a  Set-Cookie: evil,X-A=3,X-C=c")
	// Caller memory may be reused at once.
	name, value := []byte("X-D"), []byte("d")
	h.AddBytes(name, value)
	copy(name, "ZZZ")
	copy(value, "z")
	expect(t, "copied", string(h.Get("X-D")), "d")
	h.Reset()
	expect(t, "reset", h.Len(), 0)
}

func parseRequest(t *testing.T, s string) *Request {
	t.Helper()
	var p parser
	req := new(Request)
	if _, err := p.Parse([]byte(s), req); err != nil {
		t.Fatal(err)
	}
	return req
}

// readStd parses a serialized response with net/http.
func readStd(t *testing.T, b []byte, method string) (*nethttp.Response, string) {
	t.Helper()
	resp, err := nethttp.ReadResponse(bufio.NewReader(bytes.NewReader(b)), &nethttp.Request{Method: method})
	if err != nil {
		t.Fatalf("net/http cannot read %q: %v", b, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("body of %q: %v", b, err)
	}
	return resp, string(body)
}

func TestResponseAppendTo(t *testing.T) {
	date := []byte("Sun, 06 Nov 1994 08:49:37 GMT")
	get11 := "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	tests := []struct {
		name    string
		req     string // "" means nil request
		setup   func(r *response)
		want    string
		close   bool
		allowed bool
	}{
		{
			name: "hello",
			req:  get11,
			setup: func(r *response) {
				r.Header().Set("Content-Type", "text/plain")
				r.WriteString("hello")
			},
			want: "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: veloq\r\n" +
				"Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
			allowed: true,
		},
		{
			name:    "empty body",
			req:     get11,
			setup:   func(r *response) { r.SetStatus(404) },
			want:    "HTTP/1.1 404 Not Found\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: veloq\r\nContent-Length: 0\r\n\r\n",
			allowed: true,
		},
		{
			name: "HEAD",
			req:  "HEAD / HTTP/1.1\r\nHost: a\r\n\r\n",
			setup: func(r *response) {
				r.Write([]byte("not sent"))
			},
			want: "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: veloq\r\nContent-Length: 8\r\n\r\n",
		},
		{
			name: "204 and overrides",
			req:  get11,
			setup: func(r *response) {
				r.SetStatus(204)
				r.Header().Set("Server", "custom")
				r.Header().Set("Date", "")
				r.Header().Set("Content-Length", "99")
				r.Header().Set("Transfer-Encoding", "chunked")
				r.WriteString("dropped")
			},
			want: "HTTP/1.1 204 No Content\r\nServer: custom\r\n\r\n",
		},
		{
			// Fields set and removed again leave the defaults in place.
			name: "overrides removed",
			req:  get11,
			setup: func(r *response) {
				h := r.Header()
				h.Set("Server", "custom")
				h.Set("date", "")
				h.Set("Connection", "close")
				h.Set("Content-Length", "99")
				h.Add("X-A", "1")
				h.Del("SERVER")
				h.Del("Date")
				h.Del("connection")
				h.Del("content-length")
			},
			want: "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: veloq\r\n" +
				"X-A: 1\r\nContent-Length: 0\r\n\r\n",
			allowed: true,
		},
		{
			// A value cannot end its line; a name that is not a token is
			// dropped.
			name: "control characters",
			req:  get11,
			setup: func(r *response) {
				h := r.Header()
				h.Set("X-Split", "a\r\nSet-Cookie: x=1\x7f\tb  ")
				h.AddBytes([]byte("X-Long"), []byte("0123456789abcdef\n0123456789"))
				h.Add("Bad Name", "v")
				h.Add("Bad\r\nName", "v")
			},
			want: "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: veloq\r\n" +
				"X-Split: a  Set-Cookie: x=1 \tb\r\nX-Long: 0123456789abcdef 0123456789\r\nContent-Length: 0\r\n\r\n",
			allowed: true,
		},
		{
			name:    "304",
			req:     get11,
			setup:   func(r *response) { r.SetStatus(304); r.Header().Add("ETag", `"x"`) },
			want:    "HTTP/1.1 304 Not Modified\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: veloq\r\nETag: \"x\"\r\n\r\n",
			allowed: false,
		},
		{
			name:    "client asks to close",
			req:     "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
			setup:   func(r *response) {},
			want:    "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: veloq\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
			close:   true,
			allowed: true,
		},
		{
			name:    "handler asks to close",
			req:     get11,
			setup:   func(r *response) { r.Header().Set("Connection", "Close") },
			want:    "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: veloq\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n",
			close:   true,
			allowed: true,
		},
		{
			name:    "HTTP/1.0 keep-alive",
			req:     "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
			setup:   func(r *response) { r.WriteString("x") },
			want:    "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: veloq\r\nContent-Length: 1\r\nConnection: keep-alive\r\n\r\nx",
			allowed: true,
		},
		{
			name:    "HTTP/1.0 without keep-alive",
			req:     "GET / HTTP/1.0\r\n\r\n",
			setup:   func(r *response) { r.WriteString("x") },
			want:    "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: veloq\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx",
			close:   true,
			allowed: true,
		},
		{
			name:    "no request",
			setup:   func(r *response) { r.SetStatus(500) },
			want:    "HTTP/1.1 500 Internal Server Error\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nServer: veloq\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
			close:   true,
			allowed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req *Request
			method := "GET"
			if tt.req != "" {
				req = parseRequest(t, tt.req)
				method = string(req.Method)
			}
			var r response
			r.Reset(make([]byte, 0, 64))
			tt.setup(&r)
			got := r.AppendTo([]byte("prefix:"), req, date)
			if string(got) != "prefix:"+tt.want {
				t.Fatalf("got\n%q\nwant\n%q", got, "prefix:"+tt.want)
			}
			expect(t, "close", r.ShouldClose(), tt.close)
			expect(t, "body allowed", r.BodyAllowed(), tt.allowed)
			resp, body := readStd(t, got[len("prefix:"):], method)
			expect(t, "std status", resp.StatusCode, r.Status())
			if tt.allowed {
				expect(t, "std body", body, string(r.Body()))
			}
		})
	}
}

func TestResponseAppendHeadChunked(t *testing.T) {
	var r response
	r.Reset(nil)
	r.Header().Set("Content-Type", "text/plain")
	req := parseRequest(t, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	out := r.AppendHead(nil, req, nil, -1)
	if !r.Chunked() || r.ShouldClose() || !r.BodyAllowed() {
		t.Fatalf("chunked=%v close=%v allowed=%v", r.Chunked(), r.ShouldClose(), r.BodyAllowed())
	}
	out = h1.AppendChunk(out, []byte("hello, "))
	out = h1.AppendChunk(out, []byte("world"))
	out = h1.AppendLastChunk(out)
	resp, body := readStd(t, out, "GET")
	expect(t, "body", body, "hello, world")
	expect(t, "te", strings.Join(resp.TransferEncoding, ","), "chunked")
	expect(t, "no date", strings.Contains(string(out), "Date:"), false)

	// HTTP/1.0 cannot take chunked: the body is delimited by closing.
	req10 := parseRequest(t, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	out = r.AppendHead(nil, req10, nil, -1)
	if r.Chunked() || !r.ShouldClose() {
		t.Fatalf("HTTP/1.0: chunked=%v close=%v", r.Chunked(), r.ShouldClose())
	}
	expect(t, "1.0 head", string(out), "HTTP/1.1 200 OK\r\nServer: veloq\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")

	out = r.AppendHead(nil, req, nil, 1234)
	expect(t, "known length", strings.Contains(string(out), "Content-Length: 1234\r\n"), true)
}

func TestResponseAllocs(t *testing.T) {
	req := parseRequest(t, chromeRequest)
	var r response
	var dc h1.DateCache
	body := make([]byte, 0, 256)
	out := make([]byte, 0, 1024)
	now := time.Now()
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(body)
		r.Header().Set("Content-Type", "application/javascript")
		r.Header().Add("Cache-Control", "max-age=3600")
		r.WriteString("console.log('hello');")
		out = r.AppendTo(out[:0], req, dc.Bytes(now))
	})
	if allocs != 0 {
		t.Errorf("response allocates %v times", allocs)
	}
}

// TestResponseHeadBound: the head AppendHead writes never exceeds
// headBound, the room the server reserves to build it in place, for any
// status, framing and connection handling.
func TestResponseHeadBound(t *testing.T) {
	date := []byte("Sun, 06 Nov 1994 08:49:37 GMT")
	reqs := []*Request{nil,
		parseRequest(t, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
		parseRequest(t, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
		parseRequest(t, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
	}
	var r response
	for status := 0; status <= 1000; status++ {
		for _, req := range reqs {
			for _, cl := range []int64{-1, 0, 1<<63 - 1} {
				r.Reset(nil)
				r.SetStatus(status)
				r.Header().Add("X", "")
				r.Header().Add("Content-Type", "text/plain")
				head := r.AppendHead(nil, req, date, cl)
				if len(head) > r.headBound(date) {
					t.Fatalf("status %d, length %d: head of %d bytes over the bound %d", status, cl, len(head), r.headBound(date))
				}
			}
		}
	}
}

// TestResponseHeaderRepeat: the same fields set on response after response
// (the shortcut for a pair found clean before) serialize exactly as the
// first time, special names included; an unclean pair is cleaned each time.
func TestResponseHeaderRepeat(t *testing.T) {
	date := []byte("Sun, 06 Nov 1994 08:49:37 GMT")
	req := parseRequest(t, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	var r response
	var first string
	for i := range 3 {
		r.Reset(nil)
		h := r.Header()
		h.Set("Content-Type", "text/plain")
		h.Set("Server", "custom")
		h.Add("X-Bad", "a\r\nb ")
		h.Set("Date", "")
		h.Set("Content-Type", "text/html")
		got := string(r.AppendTo(nil, req, date))
		if i == 0 {
			first = got
			require.Equal(t, "HTTP/1.1 200 OK\r\nServer: custom\r\nX-Bad: a  b\r\nContent-Type: text/html\r\nContent-Length: 0\r\n\r\n", got)
		}
		require.Equal(t, first, got, "response %d", i)
	}
}

// TestResponseHeadCache: a head served from the cache is the head
// appendHead builds for the same response, with the same ShouldClose,
// Chunked and BodyAllowed, after a head cached for a response that differs
// in one thing only: the status, a field's value or its split into name
// and value, the body length, or the request's method, version or
// Connection.
func TestResponseHeadCache(t *testing.T) {
	date := []byte("Sun, 06 Nov 1994 08:49:37 GMT")
	head200 := appendStart(nil, StatusOK, date, 0)
	statuses := []int{StatusOK, StatusNoContent, StatusNotFound}
	reqs := []*Request{nil,
		parseRequest(t, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
		parseRequest(t, "HEAD / HTTP/1.1\r\nHost: a\r\n\r\n"),
		parseRequest(t, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
		parseRequest(t, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
	}
	lengths := []int64{-1, 0, 13}
	fields := [][2]string{{"Content-Type", "text/plain"}, {"Content-Typ", "etext/plain"},
		{"Content-Type", "text/html"}, {"Content-Type", "text/xxxxx"}, {"Connection", "close"}, {"Server", "x"}}
	dims := [4]int{len(statuses), len(reqs), len(lengths), len(fields)}
	set := func(r *response, k [4]int) {
		r.Reset(nil)
		r.SetStatus(statuses[k[0]])
		r.Header().Set(fields[k[3]][0], fields[k[3]][1])
	}
	var c headCache
	var want, got response
	outcome := func(r *response) [3]bool { return [3]bool{r.ShouldClose(), r.Chunked(), r.BodyAllowed()} }
	for n := 0; n < dims[0]*dims[1]*dims[2]*dims[3]; n++ {
		a := [4]int{n % dims[0], n / dims[0] % dims[1], n / dims[0] / dims[1] % dims[2], n / dims[0] / dims[1] / dims[2]}
		for d := range a {
			for v := range dims[d] {
				b := a
				b[d] = v
				set(&got, a)
				got.appendHeadCached(nil, reqs[a[1]], date, lengths[a[2]], head200, &c)
				set(&want, b)
				w := want.appendHead(nil, reqs[b[1]], date, lengths[b[2]], head200)
				for range 2 { // built after a, then from the cache
					set(&got, b)
					g := got.appendHeadCached([]byte("x"), reqs[b[1]], date, lengths[b[2]], head200, &c)
					require.Equal(t, "x"+string(w), string(g), "after %v, %v", a, b)
					require.Equal(t, outcome(&want), outcome(&got), "after %v, %v", a, b)
				}
			}
		}
	}
}

// TestResponseHeadCacheSamePair: a head is taken from the cache without
// a look at the header's bytes only when the header is the cached one's
// pair as many times over; a header whose bytes a caller was handed (Get,
// Fields) and changed, or one built otherwise, is compared byte by byte.
func TestResponseHeadCacheSamePair(t *testing.T) {
	date := []byte("Sun, 06 Nov 1994 08:49:37 GMT")
	head200 := appendStart(nil, StatusOK, date, 0)
	req := parseRequest(t, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	const name, value = "Content-Type", "text/plain"
	steps := []struct {
		what string
		set  func(h *ResponseHeader)
	}{
		{"the pair", func(h *ResponseHeader) { h.Set(name, value) }},
		{"the pair twice", func(h *ResponseHeader) { h.Add(name, value); h.Add(name, value) }},
		{"the pair and bytes", func(h *ResponseHeader) { h.Set(name, value); h.AddBytes([]byte("X-B"), []byte("2")) }},
		{"the pair again", func(h *ResponseHeader) { h.Set(name, value) }},
		{"changed through Get", func(h *ResponseHeader) { h.Set(name, value); h.Get(name)[0] = 'T' }},
		{"the pair after Get", func(h *ResponseHeader) { h.Set(name, value) }},
		{"changed through Fields", func(h *ResponseHeader) { h.Set(name, value); h.Fields()[0].Value[1] = 'E' }},
		{"the pair after Fields", func(h *ResponseHeader) { h.Set(name, value) }},
		{"as bytes, changed", func(h *ResponseHeader) { h.Set(name, value); h.SetBytes([]byte(name), []byte("text/html!")) }},
		{"deleted and set", func(h *ResponseHeader) { h.Set(name, value); h.Del(name); h.Set(name, value) }},
		{"another pair", func(h *ResponseHeader) { h.Set("X-A", "1") }},
		{"the pair last", func(h *ResponseHeader) { h.Set("X-A", "1"); h.Set(name, value) }},
		{"the pair", func(h *ResponseHeader) { h.Set(name, value) }},
		{"none", func(h *ResponseHeader) {}},
		{"the pair", func(h *ResponseHeader) { h.Set(name, value) }},
	}
	var c headCache
	var got, want response
	for _, st := range steps {
		for range 2 { // built, then from the cache
			got.Reset(nil)
			st.set(got.Header())
			want.Reset(nil)
			st.set(want.Header())
			w := string(want.appendHead(nil, req, date, 13, head200))
			require.Equal(t, w, string(got.appendHeadCached(nil, req, date, 13, head200, &c)), st.what)
		}
	}
}

// TestSpecialName: every special field name is found by its length, in
// any letter case, and other names of those lengths are not.
func TestSpecialName(t *testing.T) {
	for _, sn := range specialNames {
		require.Equal(t, sn.bit, specialName(string(sn.name)), "%s", sn.name)
		require.Equal(t, sn.bit, specialName(bytes.ToUpper(sn.name)), "%s", sn.name)
		require.Equal(t, sn.bit, specialNameBytes(bytes.ToUpper(sn.name)), "%s", sn.name)
		require.Equal(t, sn.bit, specialNameBytes([]byte(sn.str)), "%s", sn.name)
	}
	for _, name := range []string{"", "Age", "Vary", "ETag", "Expires", "Content-Type", "Content-Lengths", "Transfer-Encodin", "connectio", "Content-Lengtg", "Dat3"} {
		require.Zero(t, specialName(name), name)
		require.Zero(t, specialNameBytes([]byte(name)), name)
	}
}

// TestAddCheckedField: a field added through package checked, as
// http/proxy adds an upstream's, is the field AddBytes adds for the
// checked fields a parser delivers: same order, bytes and special bits.
func TestAddCheckedField(t *testing.T) {
	fields := [][2]string{{"Server", "nginx/1.22.1"}, {"Date", "Sat, 28 Nov 2026 14:10:09 GMT"},
		{"Content-Type", "text/plain"}, {"Connection", "keep-alive"}, {"X-Obs", "caf\xe9\tau lait"}}
	var want, got ResponseHeader
	for _, f := range fields {
		want.AddBytes([]byte(f[0]), []byte(f[1]))
		checked.AddResponseField(&got, []byte(f[0]), []byte(f[1]))
	}
	require.Equal(t, want.Fields(), got.Fields())
	require.Equal(t, want.special, got.special)
}
