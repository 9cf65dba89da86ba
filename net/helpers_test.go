package net

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/veloq/veloq/internal/backendtest"
)

// backends and forEachBackend: every behaviour test runs over both
// backends from one shared table.
var backends = backendtest.All[Backend]()

func forEachBackend(t *testing.T, f func(t *testing.T, b Backend)) {
	t.Helper()
	backendtest.Run(t, f)
}

// testLogger is the shared test logger (backendtest.Logger).
func testLogger(t testing.TB) *slog.Logger { return backendtest.Logger(t) }

// startServer listens on 127.0.0.1:0 and shuts down at test end.
func startServer(t *testing.T, b Backend, h Handler, opts ...Option) *Server {
	t.Helper()
	opts = append([]Option{WithBackend(b), WithLoops(2), WithLogger(testLogger(t))}, opts...)
	s, err := Listen("tcp", "127.0.0.1:0", h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// echoHandler writes back everything it receives.
func echoHandler() Handler {
	return &HandlerFuncs{Data: func(c *Conn) {
		b, _ := c.Next(-1)
		c.Write(b)
	}}
}

func readFull(c io.Reader, n int) ([]byte, error) {
	buf := make([]byte, n)
	_, err := io.ReadFull(c, buf)
	return buf, err
}

// dial connects to s, with a deadline that keeps a broken test from
// hanging, and closes the connection when the test ends.
func dial(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial(s.Addr().Network(), s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// await returns the next value from ch, failing the test with what if
// none comes within 20 seconds.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatal(what)
	}
	panic("unreachable")
}
