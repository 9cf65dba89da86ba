//go:build unix

package proxy

import (
	"bufio"
	"context"
	"net"
	nethttp "net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

func forEachBackend(t *testing.T, f func(t *testing.T, b vnet.Backend)) {
	t.Helper()
	backendtest.Run(t, f)
}

// newProxy makes a proxy with a test logger, closed at the end.
func newProxy(t testing.TB, opts ...Option) *Proxy {
	t.Helper()
	p, err := New(append([]Option{WithLogger(backendtest.Logger(t))}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// serve serves h on 127.0.0.1:0 with one loop on backend b and returns
// its address; shut down at the end of the test.
func serve(t testing.TB, b vnet.Backend, h vhttp.Handler, opts ...vhttp.Option) string {
	t.Helper()
	opts = append([]vhttp.Option{vhttp.WithNetOptions(vnet.WithBackend(b)), vhttp.WithNetOptions(vnet.WithLoops(1)), vhttp.WithLogger(backendtest.Logger(t))}, opts...)
	s, err := vhttp.NewServer(h, opts...)
	require.NoError(t, err)
	addr, err := s.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return addr.String()
}

// stdUpstream serves h with net/http on 127.0.0.1:0.
func stdUpstream(t testing.TB, h nethttp.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &nethttp.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// rawUpstream serves hand-written answers: for each request read, reply
// returns the bytes to write (nil: write nothing and keep the connection
// open; close: close it after writing).
func rawUpstream(t testing.TB, reply func(r *nethttp.Request) (out []byte, close bool)) string {
	t.Helper()
	return backendtest.ServeTCP(t, func(c net.Conn, _ int) {
		br := bufio.NewReader(c)
		for {
			r, err := nethttp.ReadRequest(br)
			if err != nil {
				return
			}
			out, cl := reply(r)
			if out != nil {
				if _, err := c.Write(out); err != nil {
					return
				}
			}
			if cl {
				return
			}
		}
	})
}

// closedAddr returns an address nothing listens on.
func closedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := ln.Addr().String()
	ln.Close()
	return a
}

func httpClient() *nethttp.Client {
	return &nethttp.Client{
		Timeout:   10 * time.Second,
		Transport: &nethttp.Transport{MaxIdleConnsPerHost: 8, DisableCompression: true},
	}
}
