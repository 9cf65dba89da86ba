package http

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	nethttp "net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// streamRouter routes POST /upload to the slow hashing StreamBody reader
// (limit 16 MiB) below a counting middleware applied with Chain, and
// POST /small to a handler that answers the collected body's hash; the
// whole is again under Chain, as an application's root usually is.
func streamRouter(failed *atomic.Pointer[error], maxPart, mwRuns *atomic.Int64) Handler {
	count := func(h Handler) Handler {
		return HandlerFunc(func(w *ResponseWriter, r *Request) {
			mwRuns.Add(1)
			h.ServeHTTP(w, r)
		})
	}
	rt := NewRouter()
	rt.Handle("POST /upload", Chain(StreamBody(streamHashHandler(failed, maxPart), 16<<20), count))
	rt.HandleFunc("POST /small", func(w *ResponseWriter, r *Request) {
		fmt.Fprintf(w, "%d %x", len(r.Body), sha256.Sum256(r.Body))
	})
	return Chain(rt, count)
}

func postBody(t *testing.T, cl *nethttp.Client, url string, body io.Reader) (int, string) {
	t.Helper()
	resp, err := cl.Post(url, "application/octet-stream", body)
	require.NoError(t, err)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(got)
}

// TestStreamBodyRoute: one route of a Router streams its uploads, past
// the collected limit (4 MiB) and in small parts, while another route
// still gets its body collected and refused past that limit; each
// route's Content-Length limit is applied before its handler runs.
func TestStreamBodyRoute(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var failed atomic.Pointer[error]
		var maxPart, mwRuns atomic.Int64
		s := startServer(t, b, streamRouter(&failed, &maxPart, &mwRuns))
		base := "http://" + s.Addr().String()
		body, want := randomBody(t, 12<<20)
		cl := newClient()

		status, got := postBody(t, cl, base+"/upload", bytes.NewReader(body))
		require.Equal(t, 200, status, got)
		require.Equal(t, want, got)
		// Chunked.
		status, got = postBody(t, cl, base+"/upload", io.MultiReader(bytes.NewReader(body[:1<<20]), bytes.NewReader(body[1<<20:])))
		require.Equal(t, 200, status, got)
		require.Equal(t, want, got)
		require.Nil(t, failed.Load())
		require.LessOrEqual(t, maxPart.Load(), int64(1<<20), "a part larger than a few reads: the body was collected")
		require.Equal(t, int64(4), mwRuns.Load(), "each middleware runs once a request")

		// The collected route on the same server.
		small, wantSmall := randomBody(t, 10<<10)
		status, got = postBody(t, cl, base+"/small", bytes.NewReader(small))
		require.Equal(t, 200, status, got)
		require.Equal(t, wantSmall, got)
		status, got = postBody(t, cl, base+"/small", io.MultiReader(bytes.NewReader(small[:100]), bytes.NewReader(small[100:])))
		require.Equal(t, 200, status, got)
		require.Equal(t, wantSmall, got)

		// Limits: the collected route's (4 MiB), the streamed route's
		// (16 MiB), both on the announced length.
		for _, tc := range []struct {
			path   string
			length int
			status int
		}{{"/small", 5 << 20, StatusRequestEntityTooLarge}, {"/upload", 17 << 20, StatusRequestEntityTooLarge}} {
			c, br := rawConn(t, s)
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", tc.path, tc.length)
			resp, _ := readResponse(t, br, "POST")
			require.Equal(t, tc.status, resp.StatusCode, tc.path)
		}
		// A chunked collected body past the limit.
		status, _ = postBody(t, cl, base+"/small", io.MultiReader(bytes.NewReader(body[:1]), bytes.NewReader(body[1:])))
		require.Equal(t, StatusRequestEntityTooLarge, status)
	})
}

// TestStreamBodyRouteHTTP2 is TestStreamBodyRoute's streamed and
// collected routes over h2c.
func TestStreamBodyRouteHTTP2(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var failed atomic.Pointer[error]
		var maxPart, mwRuns atomic.Int64
		s := startServer(t, b, streamRouter(&failed, &maxPart, &mwRuns))
		base := "http://" + s.Addr().String()
		body, want := randomBody(t, 12<<20)
		cl := h2Client(nil)

		status, got := postBody(t, cl, base+"/upload", bytes.NewReader(body))
		require.Equal(t, 200, status, got)
		require.Equal(t, want, got)
		require.Nil(t, failed.Load())
		require.LessOrEqual(t, maxPart.Load(), int64(64<<10), "a part larger than the stream window")

		small, wantSmall := randomBody(t, 10<<10)
		status, got = postBody(t, cl, base+"/small", bytes.NewReader(small))
		require.Equal(t, 200, status, got)
		require.Equal(t, wantSmall, got)
		status, _ = postBody(t, cl, base+"/small", bytes.NewReader(body))
		require.Equal(t, StatusRequestEntityTooLarge, status)
	})
}

// TestStreamBodyTrailer: a StreamBody reader gets the trailer of a
// chunked HTTP/1.1 body and of an HTTP/2 stream (Responder.BodyTrailer)
// once OnBody reported the end, and nothing before.
func TestStreamBodyTrailer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, StreamBody(HandlerFunc(func(w *ResponseWriter, req *Request) {
			r, err := w.Detach()
			if err != nil {
				panic(err)
			}
			n, early := 0, 0
			r.OnBody(func(part []byte, end bool, err error) {
				n += len(part)
				if !end {
					early += len(r.BodyTrailer())
					return
				}
				var out []byte
				out = fmt.Appendf(out, "%d %d", n, early)
				for _, f := range r.BodyTrailer() {
					out = fmt.Appendf(out, " %s=%s", f.Name, f.Value)
				}
				r.Respond(StatusOK, out)
			})
		}), 0))

		c, br := rawConn(t, s)
		fmt.Fprintf(c, "POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Sum: v1\r\nX-Other: o\r\n\r\n")
		resp, got := readResponse(t, br, "POST")
		require.Equal(t, StatusOK, resp.StatusCode)
		require.Equal(t, "5 0 X-Sum=v1 X-Other=o", got)

		req, err := nethttp.NewRequest("POST", "http://"+s.Addr().String()+"/t", io.MultiReader(bytes.NewReader([]byte("hello!"))))
		require.NoError(t, err)
		req.Trailer = nethttp.Header{"X-Sum": {"v2"}}
		resp, err = h2Client(nil).Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "6 0 x-sum=v2", string(body))
	})
}
