package http

import (
	"errors"
	"io"
	"net"
	nethttp "net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// later answers a detached request after d on its loop.
func later(w *ResponseWriter, d time.Duration, f func(r *Responder)) {
	r, err := w.Detach()
	if err != nil {
		panic(err)
	}
	r.Loop().AfterFunc(d, func() { f(r) })
}

// detachHandler answers each path its own way, after a timer.
func detachHandler(w *ResponseWriter, req *Request) {
	switch string(req.Path) {
	case "/whole":
		later(w, 5*time.Millisecond, func(r *Responder) {
			r.Header().Set("X-Later", "yes")
			r.Respond(StatusOK, []byte("whole answer"))
		})
	case "/chunked":
		later(w, 5*time.Millisecond, func(r *Responder) {
			r.WriteHead(StatusOK, -1)
			r.Write([]byte("part1,"))
			r.Loop().AfterFunc(5*time.Millisecond, func() {
				r.Write([]byte("part2"))
				r.Trailer().Set("X-Sum", "42")
				r.End()
			})
		})
	case "/known":
		later(w, 5*time.Millisecond, func(r *Responder) {
			r.WriteHead(StatusCreated, 10)
			r.Write([]byte("01234"))
			r.Loop().AfterFunc(2*time.Millisecond, func() {
				r.Write([]byte("56789"))
				r.End()
			})
		})
	case "/slow":
		later(w, 30*time.Millisecond, func(r *Responder) { r.Respond(StatusOK, []byte("slow")) })
	case "/fail":
		later(w, 5*time.Millisecond, func(r *Responder) { r.Fail(StatusBadGateway) })
	case "/failafter":
		later(w, 5*time.Millisecond, func(r *Responder) {
			r.WriteHead(StatusOK, 100)
			r.Write([]byte("only part"))
			r.Loop().AfterFunc(2*time.Millisecond, func() { r.Fail(StatusBadGateway) })
		})
	case "/now":
		r, _ := w.Detach()
		r.Respond(StatusAccepted, []byte("in handler"))
	default:
		w.Write(req.Path)
	}
}

func TestDetachHTTP1(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(detachHandler))
		c, br := rawConn(t, s)

		io.WriteString(c, "GET /whole HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body := readResponse(t, br, "GET")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "whole answer", body)
		require.Equal(t, "yes", resp.Header.Get("X-Later"))
		require.EqualValues(t, 12, resp.ContentLength)

		io.WriteString(c, "GET /chunked HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body = readResponse(t, br, "GET")
		require.Equal(t, "part1,part2", body)
		require.Equal(t, []string{"chunked"}, resp.TransferEncoding)
		require.Equal(t, "42", resp.Trailer.Get("X-Sum"))

		io.WriteString(c, "GET /known HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body = readResponse(t, br, "GET")
		require.Equal(t, 201, resp.StatusCode)
		require.Equal(t, "0123456789", body)
		require.EqualValues(t, 10, resp.ContentLength)

		io.WriteString(c, "HEAD /whole HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body = readResponse(t, br, "HEAD")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "", body)
		require.EqualValues(t, 12, resp.ContentLength)

		io.WriteString(c, "GET /now HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body = readResponse(t, br, "GET")
		require.Equal(t, 202, resp.StatusCode)
		require.Equal(t, "in handler", body)

		io.WriteString(c, "GET /fail HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, _ = readResponse(t, br, "GET")
		require.Equal(t, 502, resp.StatusCode)

		// The connection went on after each.
		io.WriteString(c, "GET /plain HTTP/1.1\r\nHost: x\r\n\r\n")
		_, body = readResponse(t, br, "GET")
		require.Equal(t, "/plain", body)
	})
}

func TestDetachPipelinedInOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(detachHandler))
		c, br := rawConn(t, s)
		io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"+
			"GET /b HTTP/1.1\r\nHost: x\r\n\r\n"+
			"GET /whole HTTP/1.1\r\nHost: x\r\n\r\n"+
			"GET /c HTTP/1.1\r\nHost: x\r\n\r\n")
		for _, want := range []string{"slow", "/b", "whole answer", "/c"} {
			_, body := readResponse(t, br, "GET")
			require.Equal(t, want, body)
		}
	})
}

func TestDetachFailAfterHead(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(detachHandler))
		c, br := rawConn(t, s)
		io.WriteString(c, "GET /failafter HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := nethttp.ReadResponse(br, &nethttp.Request{Method: "GET"})
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		body, err := io.ReadAll(resp.Body)
		require.Equal(t, "only part", string(body))
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		require.Eventually(t, func() bool { return s.Stats().Conns == 0 }, 5*time.Second, 5*time.Millisecond)
	})
}

// TestDetachClientGone: the client closes before End; OnGone runs, a
// later Write fails with net.ErrClosed, and the connection is gone.
func TestDetachClientGone(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var gone atomic.Bool
		var writeErr atomic.Value
		detached := make(chan struct{})
		s := startServer(t, b, HandlerFunc(func(w *ResponseWriter, req *Request) {
			r, err := w.Detach()
			require.NoError(t, err)
			r.OnGone(func() {
				gone.Store(true)
				_, err := r.Write([]byte("late"))
				writeErr.Store(err)
				r.End() // harmless
			})
			r.WriteHead(StatusOK, -1)
			r.Write([]byte("started"))
			close(detached)
		}))
		c, _ := rawConn(t, s)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		<-detached
		c.Close()
		require.Eventually(t, gone.Load, 5*time.Second, time.Millisecond)
		require.Eventually(t, func() bool { return s.Stats().Conns == 0 }, 5*time.Second, 5*time.Millisecond)
		err, _ := writeErr.Load().(error)
		require.ErrorIs(t, err, net.ErrClosed)
	})
}

func TestDetachUnavailableOffloaded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var got atomic.Value
		s := startServer(t, b, Offloaded(testPool(t), HandlerFunc(func(w *ResponseWriter, req *Request) {
			_, err := w.Detach()
			got.Store(err)
			w.WriteString("offloaded")
		})))
		c, br := rawConn(t, s)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		_, body := readResponse(t, br, "GET")
		require.Equal(t, "offloaded", body)
		err, _ := got.Load().(error)
		require.True(t, errors.Is(err, ErrDetachUnavailable), "got %v", err)
	})
}
