package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// panic(http.ErrAbortHandler) drops the connection without a 500 and
// without a log, on the FromStd and the fast path alike.
func TestAbortHandlerDropsConnection(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		abortStd := FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			w.Header().Set("X-Never", "sent")
			io.WriteString(w, "never sent")
			panic(nethttp.ErrAbortHandler)
		}))
		abortFast := HandlerFunc(func(w *ResponseWriter, r *Request) {
			w.WriteString("never sent")
			panic(nethttp.ErrAbortHandler)
		})
		for name, h := range map[string]Handler{"std": abortStd, "fast": abortFast, "offloaded": Offloaded(testPool(t), abortFast)} {
			t.Run(name, func(t *testing.T) {
				s := startServer(t, b, h)
				c, br := rawConn(t, s)
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
				expectClosed(t, c, br) // no bytes at all: no 500
				require.Zero(t, s.Stats().Panics)
			})
		}
	})
}

// A FromStd request's context carries what net/http puts there, and
// functions registered with RegisterOnShutdown run on Shutdown.
func TestFromStdContextValues(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		onShutdown := make(chan struct{})
		h := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			srv, ok := r.Context().Value(nethttp.ServerContextKey).(*nethttp.Server)
			if !ok || srv == nil {
				t.Error("no *http.Server under ServerContextKey")
				return
			}
			srv.RegisterOnShutdown(func() { close(onShutdown) })
			addr, _ := r.Context().Value(nethttp.LocalAddrContextKey).(net.Addr)
			fmt.Fprintf(w, "%v %v", addr, srv.ReadHeaderTimeout)
		})
		s := newServer(t, FromStd(h), WithNetOptions(vnet.WithBackend(b)), WithNetOptions(vnet.WithLoops(1)), WithLogger(testLogger(t)), WithReadHeaderTimeout(3*time.Second))
		if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		c, br := rawConn(t, s)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		_, body := readResponse(t, br, "GET")
		require.Equal(t, fmt.Sprintf("%v 3s", s.Addr()), body)
		c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
		select {
		case <-onShutdown:
		case <-time.After(5 * time.Second):
			t.Fatal("RegisterOnShutdown function not run")
		}
	})
}

// http.NewResponseController's read and write deadlines work through
// FromStd.
func TestFromStdResponseControllerDeadlines(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		writeErr := make(chan error, 1)
		mux := nethttp.NewServeMux()
		mux.HandleFunc("POST /read", func(w nethttp.ResponseWriter, r *nethttp.Request) {
			rc := nethttp.NewResponseController(w)
			require.NoError(t, rc.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
			_, err := io.ReadAll(r.Body)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				require.NoError(t, rc.SetReadDeadline(time.Time{}))
				io.WriteString(w, "read deadline")
				return
			}
			fmt.Fprintf(w, "read: %v", err)
		})
		mux.HandleFunc("GET /write", func(w nethttp.ResponseWriter, r *nethttp.Request) {
			rc := nethttp.NewResponseController(w)
			require.NoError(t, rc.EnableFullDuplex())
			require.NoError(t, rc.SetWriteDeadline(time.Now().Add(200*time.Millisecond)))
			chunk := make([]byte, 64<<10)
			for range 4096 { // at most 256 MiB: far more than the socket buffers hold
				if _, err := w.Write(chunk); err != nil {
					writeErr <- err
					return
				}
				if err := rc.Flush(); err != nil {
					writeErr <- err
					return
				}
			}
			writeErr <- nil
		})
		s := startServer(t, b, FromStd(mux))

		c, br := rawConn(t, s)
		io.WriteString(c, "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
		_, body := readResponse(t, br, "POST")
		require.Equal(t, "read deadline", body)

		// A client that never reads: the handler's write fails at its
		// deadline and the connection is dropped.
		w, _ := rawConn(t, s)
		io.WriteString(w, "GET /write HTTP/1.1\r\nHost: x\r\n\r\n")
		select {
		case err := <-writeErr:
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		case <-time.After(10 * time.Second):
			t.Fatal("write deadline never hit")
		}
		require.Eventually(t, func() bool { return s.Stats().Conns == 1 }, 5*time.Second, 5*time.Millisecond,
			"the write-deadline connection was not dropped")
	})
}

// Contexts derived from a FromStd request's context, and functions
// registered with context.AfterFunc, see the client leave; the context
// is canceled when the handler returns, too.
func TestFromStdDerivedContextsCanceled(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		started := make(chan struct{})
		derived := make(chan error, 1)
		after := make(chan struct{})
		returnedc := make(chan context.Context, 1)
		h := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			if r.URL.Path == "/quick" {
				returnedc <- r.Context()
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
			defer cancel()
			context.AfterFunc(r.Context(), func() { close(after) })
			close(started)
			<-ctx.Done()
			derived <- ctx.Err()
		})
		s := startServer(t, b, FromStd(h))
		c, br := rawConn(t, s)
		io.WriteString(c, "GET /quick HTTP/1.1\r\nHost: x\r\n\r\n")
		readResponse(t, br, "GET")
		returned := <-returnedc
		require.Eventually(t, func() bool { return returned.Err() == context.Canceled }, 5*time.Second, 5*time.Millisecond,
			"context not canceled after the handler returned")

		io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
		<-started
		c.Close()
		require.ErrorIs(t, <-derived, context.Canceled)
		select {
		case <-after:
		case <-time.After(5 * time.Second):
			t.Fatal("AfterFunc not run")
		}
	})
}
