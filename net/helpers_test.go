package net

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/veloq/veloq/reactor"
	"github.com/veloq/veloq/uring"
)

// backends is the table every behaviour test runs over. io_uring skips
// with the reason where the kernel or a seccomp filter refuses it.
var backends = []reactor.Backend{reactor.BackendUring, reactor.BackendEpoll}

func forEachBackend(t *testing.T, f func(t *testing.T, b reactor.Backend)) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			if b == reactor.BackendUring {
				if err := reactor.ProbeUring(); err != nil {
					if errors.Is(err, uring.ErrUnavailable) || strings.Contains(err.Error(), "io_uring") {
						t.Skipf("io_uring unavailable here: %v", err)
					}
					t.Fatalf("probe: %v", err)
				}
			}
			f(t, b)
		})
	}
}

// testLogger discards info and keeps errors visible in -v output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// startServer listens on 127.0.0.1:0 and shuts down at test end.
func startServer(t *testing.T, b reactor.Backend, h Handler, opts ...Option) *Server {
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

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func readFull(c io.Reader, n int) ([]byte, error) {
	buf := make([]byte, n)
	_, err := io.ReadFull(c, buf)
	return buf, err
}
