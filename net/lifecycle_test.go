//go:build linux

// Linux only: creates sockets with Linux's SOCK_CLOEXEC/SOCK_NONBLOCK flags and counts descriptors in /proc.

package net

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A Unix socket file the server bound is removed when it stops, by
// Shutdown or by Close, so the next server can listen on the same path
// (it failed with EADDRINUSE while the file stayed).
func TestUnixSocketFileRemoved(t *testing.T) {
	stops := []struct {
		name string
		stop func(*Server) error
	}{
		{"Shutdown", func(s *Server) error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return s.Shutdown(ctx)
		}},
		{"Close", (*Server).Close},
	}
	forEachBackend(t, func(t *testing.T, b Backend) {
		for _, st := range stops {
			t.Run(st.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "veloq.sock")
				for round := range 2 { // the second round listens where the first left off
					s, err := Listen("unix", path, echoHandler(), WithBackend(b), WithLoops(2), WithLogger(testLogger(t)))
					if err != nil {
						t.Fatalf("round %d: listen: %v", round, err)
					}
					c, err := net.Dial("unix", path)
					if err != nil {
						t.Fatalf("round %d: dial: %v", round, err)
					}
					c.SetDeadline(time.Now().Add(5 * time.Second))
					c.Write([]byte("ping"))
					if p, err := readFull(c, 4); err != nil || string(p) != "ping" {
						t.Fatalf("round %d: echo %q, %v", round, p, err)
					}
					c.Close()
					if err := st.stop(s); err != nil {
						t.Fatalf("round %d: %s: %v", round, st.name, err)
					}
					if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
						t.Fatalf("round %d: after %s the socket file is still there (stat: %v)", round, st.name, err)
					}
				}
			})
		}
	})
}

// A socket the caller bound and handed to AddListener keeps its file: like
// net.FileListener's, it is the caller's to remove.
func TestUnixSocketFileKeptForAddListener(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		path := filepath.Join(t.TempDir(), "veloq.sock")
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			unix.Close(fd)
			t.Fatal(err)
		}
		if err := unix.Listen(fd, 16); err != nil {
			unix.Close(fd)
			t.Fatal(err)
		}
		s, err := NewServer(echoHandler(), WithBackend(b), WithLoops(1), WithLogger(testLogger(t)))
		if err != nil {
			unix.Close(fd)
			t.Fatal(err)
		}
		defer s.Close()
		ln, err := s.Loops()[0].AddListener(fd, "unix", echoHandler(), nil)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-ln.Done():
			t.Fatal("Done is closed before the listener is")
		default:
		}
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ln.Done():
		default:
			t.Fatal("Done is not closed after Close returned")
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("the caller's socket file was removed: %v", err)
		}
	})
}

// A Unix client that never bound a name shows as the standard library
// shows it ("@"), not as an empty string.
func TestUnixUnnamedPeerAddr(t *testing.T) {
	want := stdUnnamedPeer(t)
	if want == "" {
		t.Fatal("the standard library shows an unnamed peer as an empty string; this test expects a name")
	}
	forEachBackend(t, func(t *testing.T, b Backend) {
		got := make(chan string, 1)
		h := &HandlerFuncs{Open: func(c *Conn) { got <- c.RemoteAddr().String() }}
		s, err := Listen("unix", filepath.Join(t.TempDir(), "veloq.sock"), h, WithBackend(b), WithLoops(2), WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c, err := net.Dial("unix", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if g := await(t, got, "no connection opened"); g != want {
			t.Fatalf("RemoteAddr().String() = %q, want %q as net.UnixConn shows", g, want)
		}
	})
}

// Server.ListenAndServe serves like the package-level function while the
// caller keeps the Server: its Stats are readable as it runs. It returns
// nil when its context ends (after a graceful shutdown) and
// ErrServerClosed when the server is closed under it.
func TestServerListenAndServe(t *testing.T) {
	stops := []struct {
		name string
		stop func(s *Server, cancel context.CancelFunc)
		want error
	}{
		{"context", func(_ *Server, cancel context.CancelFunc) { cancel() }, nil},
		{"Close", func(s *Server, _ context.CancelFunc) { s.Close() }, ErrServerClosed},
	}
	forEachBackend(t, func(t *testing.T, b Backend) {
		for _, st := range stops {
			t.Run(st.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "veloq.sock")
				s, err := NewServer(echoHandler(), WithBackend(b), WithLoops(2), WithLogger(testLogger(t)))
				require.NoError(t, err)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				served := make(chan error, 1)
				go func() { served <- s.ListenAndServe(ctx, "unix", path, 5*time.Second) }()
				require.Eventually(t, func() bool { return s.Addr() != nil }, 10*time.Second, time.Millisecond, "never listened")

				c, err := net.Dial("unix", path)
				require.NoError(t, err)
				c.SetDeadline(time.Now().Add(5 * time.Second))
				c.Write([]byte("ping"))
				p, err := readFull(c, 4)
				require.NoError(t, err)
				require.Equal(t, "ping", string(p))
				c.Close()
				accepted := func() (n uint64) {
					for _, ls := range s.Stats() {
						n += ls.Accepted
					}
					return n
				}
				require.Equal(t, uint64(1), accepted(), "Stats while serving")

				st.stop(s, cancel)
				require.ErrorIs(t, await(t, served, "ListenAndServe did not return"), st.want)
				_, err = s.Listen("unix", path)
				require.ErrorIs(t, err, ErrServerClosed, "the server is stopped when ListenAndServe returns")
			})
		}
	})
}

// When Listen fails, ListenAndServe returns its error at once and closes
// the server, whose loops would otherwise outlive it.
func TestServerListenAndServeListenError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		busy, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer busy.Close()
		s, err := NewServer(echoHandler(), WithBackend(b), WithLoops(2), WithLogger(testLogger(t)))
		require.NoError(t, err)
		err = s.ListenAndServe(context.Background(), "tcp", busy.Addr().String(), time.Second)
		require.ErrorIs(t, err, unix.EADDRINUSE)
		_, err = s.Listen("tcp", "127.0.0.1:0")
		require.ErrorIs(t, err, ErrServerClosed)
	})
}

// CloseListeners stops accepting (removing the Unix socket file) while the
// open connections go on being served.
func TestCloseListeners(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		path := filepath.Join(t.TempDir(), "veloq.sock")
		s, err := Listen("unix", path, echoHandler(), WithBackend(b), WithLoops(2), WithLogger(testLogger(t)))
		require.NoError(t, err)
		defer s.Close()
		c, err := net.Dial("unix", path)
		require.NoError(t, err)
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		// One round trip first: a connection still in the accept queue
		// would be reset by closing the listener.
		c.Write([]byte("ping"))
		p, err := readFull(c, 4)
		require.NoError(t, err)
		require.Equal(t, "ping", string(p))

		require.NoError(t, s.CloseListeners())
		_, err = net.Dial("unix", path)
		require.Error(t, err, "still accepting")
		_, err = os.Stat(path)
		require.ErrorIs(t, err, fs.ErrNotExist)

		c.Write([]byte("pong"))
		p, err = readFull(c, 4)
		require.NoError(t, err)
		require.Equal(t, "pong", string(p), "served after CloseListeners")
	})
}
