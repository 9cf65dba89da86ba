package http

import (
	"bufio"
	"io"
	nethttp "net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// withHeader is a fast-path middleware: it sets a field and calls next.
func withHeader(next Handler) Handler {
	return HandlerFunc(func(w *ResponseWriter, r *Request) {
		w.Header().Set("X-Middleware", "yes")
		next.ServeHTTP(w, r)
	})
}

// A FromStd handler wrapped in a fast middleware runs off the loop as the
// root one does: blocked handlers run side by side (with two loops, run
// inline they could not all be inside at once), Flush streams, the body
// arrives, and the middleware's fields are in the response.
func TestFromStdBelowMiddleware(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		const n = 4
		var inside atomic.Int64
		release := make(chan struct{})
		mux := nethttp.NewServeMux()
		mux.HandleFunc("GET /block", func(w nethttp.ResponseWriter, r *nethttp.Request) {
			inside.Add(1)
			<-release
			io.WriteString(w, "done")
		})
		flushed := make(chan struct{})
		mux.HandleFunc("GET /stream", func(w nethttp.ResponseWriter, r *nethttp.Request) {
			io.WriteString(w, "first;")
			w.(nethttp.Flusher).Flush()
			<-flushed
			io.WriteString(w, "second")
		})
		mux.HandleFunc("POST /echo", func(w nethttp.ResponseWriter, r *nethttp.Request) { io.Copy(w, r.Body) })
		s := startServer(t, b, withHeader(FromStd(mux)))

		var wg sync.WaitGroup
		for range n {
			c, br := rawConn(t, s)
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.WriteString(c, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, body := readResponse(t, br, "GET")
				if resp.StatusCode != 200 || body != "done" || resp.Header.Get("X-Middleware") != "yes" {
					t.Errorf("blocked handler: %d %q %v", resp.StatusCode, body, resp.Header)
				}
			}()
		}
		require.Eventually(t, func() bool { return inside.Load() == n }, 5*time.Second, 5*time.Millisecond,
			"%d of %d handlers running at once", inside.Load(), n)
		close(release)
		wg.Wait()

		c, br := rawConn(t, s)
		io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := nethttp.ReadResponse(br, nil)
		require.NoError(t, err)
		require.Equal(t, "yes", resp.Header.Get("X-Middleware"))
		first := make([]byte, len("first;"))
		_, err = io.ReadFull(resp.Body, first)
		require.NoError(t, err, "the flushed part before the handler returns")
		require.Equal(t, "first;", string(first))
		close(flushed)
		rest, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, "second", string(rest))

		// Keep-alive and pipelining go on after it, with bodies.
		io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloPOST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nbye")
		for _, want := range []string{"hello", "bye"} {
			resp, body := readResponse(t, br, "POST")
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, want, body)
		}
	})
}

// Under Offloaded the handler runs on the pool with a buffered response:
// Flush does not panic and the response is complete.
func TestFromStdUnderOffloaded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		h := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			w.Header().Set("X-Std", "1")
			io.WriteString(w, "a;")
			w.(nethttp.Flusher).Flush()
			io.WriteString(w, "b")
		})
		s := startServer(t, b, Offloaded(testPool(t), FromStd(h)))
		c, br := rawConn(t, s)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body := readResponse(t, bufio.NewReader(br), "GET")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "a;b", body)
		require.Equal(t, "1", resp.Header.Get("X-Std"))
	})
}
