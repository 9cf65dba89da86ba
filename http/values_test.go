package http

import (
	"io"
	nethttp "net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

func parseWithBody(t *testing.T, raw string) *Request {
	t.Helper()
	var req Request
	var p parser
	n, err := p.Parse([]byte(raw), &req)
	require.NoError(t, err)
	if rest := raw[n:]; rest != "" {
		req.Body = []byte(rest)
	}
	return &req
}

func TestRequestValues(t *testing.T) {
	r := parseWithBody(t, "POST /s?q=go+lang&empty=&flag&q=second&enc=%41%2b HTTP/1.1\r\nHost: x\r\n"+
		"Content-Type: application/x-www-form-urlencoded; charset=utf-8\r\n"+
		"Cookie: session=abc123; theme=\"dark\"\r\nCookie: late=1\r\n\r\nq=from-body&b=2")
	tests := []struct {
		name, key string
		get       func(string) ([]byte, bool)
		want      string
		ok        bool
	}{
		{"query first of two", "q", r.QueryValue, "go+lang", true},
		{"query empty", "empty", r.QueryValue, "", true},
		{"query flag", "flag", r.QueryValue, "", true},
		{"query missing", "nope", r.QueryValue, "", false},
		{"query raw escape", "enc", r.QueryValue, "%41%2b", true},
		{"form body first", "q", r.FormValue, "from-body", true},
		{"form body only", "b", r.FormValue, "2", true},
		{"form falls back to query", "flag", r.FormValue, "", true},
		{"cookie", "session", r.Cookie, "abc123", true},
		{"cookie quoted", "theme", r.Cookie, "dark", true},
		{"cookie second field", "late", r.Cookie, "1", true},
		{"cookie missing", "nope", r.Cookie, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := tc.get(tc.key)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, string(v))
		})
	}
	// Without the form Content-Type the body is not form data.
	r2 := parseWithBody(t, "POST /s?q=query HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n\r\nq=body")
	v, _ := r2.FormValue("q")
	require.Equal(t, "query", string(v))

	allocs := testing.AllocsPerRun(100, func() {
		r.QueryValue("enc")
		r.FormValue("b")
		r.Cookie("late")
	})
	require.Zero(t, allocs)
}

func TestAppendUnescaped(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"go+lang", "go lang", ""},
		{"%41%2b%2F", "A+/", ""},
		{"plain", "plain", ""},
		{"bad%4", "", "malformed"},
		{"bad%zz", "", "malformed"},
	} {
		got, err := AppendUnescaped([]byte("pre:"), []byte(tc.in))
		if tc.err != "" {
			require.ErrorIs(t, err, ErrBadEscape, tc.in)
			require.Equal(t, "pre:", string(got))
			continue
		}
		require.NoError(t, err)
		require.Equal(t, "pre:"+tc.want, string(got))
	}
}

// An offloaded handler's context is canceled when the client goes away.
func TestOffloadedContextCanceledOnDisconnect(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		started := make(chan struct{})
		canceled := make(chan error, 1)
		h := Offloaded(testPool(t), HandlerFunc(func(w *ResponseWriter, r *Request) {
			close(started)
			select {
			case <-w.Context().Done():
				canceled <- w.Context().Err()
			case <-time.After(5 * time.Second):
				canceled <- nil
			}
		}))
		s := startServer(t, b, h)
		c, _ := rawConn(t, s)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		<-started
		c.Close()
		require.Error(t, <-canceled, "context not canceled when the client left")
		require.Eventually(t, func() bool { return s.Stats().Conns == 0 }, 5*time.Second, 5*time.Millisecond)
	})
}

// OffloadedBlocking runs blocking fast handlers side by side: eight of
// them are inside at once although the stealable pool has two workers.
func TestOffloadedBlockingRunsConcurrently(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		const n = 8
		var inside atomic.Int64
		release := make(chan struct{})
		h := OffloadedBlocking(testBlockingPool(t, n), HandlerFunc(func(w *ResponseWriter, r *Request) {
			inside.Add(1)
			<-release // blocks, e.g. on a database
			w.WriteString("done")
		}))
		s := startServer(t, b, h)
		results := make(chan string, n)
		for range n {
			c, br := rawConn(t, s)
			go func() {
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err := nethttp.ReadResponse(br, nil)
				if err != nil {
					results <- err.Error()
					return
				}
				body, _ := io.ReadAll(resp.Body)
				results <- string(body)
			}()
		}
		require.Eventually(t, func() bool { return inside.Load() == n }, 5*time.Second, 5*time.Millisecond,
			"%d of %d blocking handlers running at once", inside.Load(), n)
		close(release)
		for range n {
			require.Equal(t, "done", <-results)
		}
	})
}

// An offloaded handler streams with Flush: the first part reaches the
// client before the handler goes on, the response is chunked, and the
// connection serves the next request. Inline, Flush is refused.
func TestOffloadedFlushStreams(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		next := make(chan struct{})
		flushErr := make(chan error, 1)
		m := NewRouter()
		m.Handle("GET /stream", Offloaded(testPool(t), HandlerFunc(func(w *ResponseWriter, r *Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteString("part1;")
			if err := w.Flush(); err != nil {
				t.Errorf("Flush: %v", err)
				return
			}
			<-next
			w.WriteString("part2;")
			w.Flush()
			w.WriteString("end")
		})))
		m.HandleFunc("GET /inline", func(w *ResponseWriter, r *Request) {
			flushErr <- w.Flush()
			w.WriteString("inline")
		})
		s := startServer(t, b, m)
		c, br := rawConn(t, s)
		io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := nethttp.ReadResponse(br, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"chunked"}, resp.TransferEncoding)
		require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		first := make([]byte, len("part1;"))
		_, err = io.ReadFull(resp.Body, first)
		require.NoError(t, err)
		require.Equal(t, "part1;", string(first))
		close(next)
		rest, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, "part2;end", string(rest))

		io.WriteString(c, "GET /inline HTTP/1.1\r\nHost: x\r\n\r\n")
		_, body := readResponse(t, br, "GET")
		require.Equal(t, "inline", body)
		require.ErrorIs(t, <-flushErr, ErrNotOffloaded)

		// HEAD streams no body and no last chunk (next is closed by now).
		io.WriteString(c, "HEAD /stream HTTP/1.1\r\nHost: x\r\n\r\nGET /inline HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body = readResponse(t, br, "HEAD")
		require.Equal(t, 200, resp.StatusCode)
		require.Empty(t, body)
		_, body = readResponse(t, br, "GET")
		require.Equal(t, "inline", body)
	})
}
