//go:build linux

// Linux only: drops the page cache with fadvise and checks sendfile(2) and cachestat(2) paths.

package net

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/executor"
	"github.com/veloq/veloq/internal/backendtest"
)

// fileOf writes data to a new file in the test's temporary directory and
// returns it open.
func fileOf(t *testing.T, data []byte) *os.File {
	t.Helper()
	name := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(name, data, 0o600))
	f, err := os.Open(name)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func newTestPool(t *testing.T) *executor.BlockingPool {
	b := executor.NewBlockingPool()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	return b
}

func patterned(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// sendFileHandler writes "head:", sends the part of f, writes ":tail"
// when done and closes. It records what a write during the send returned.
func sendFileHandler(t *testing.T, pool *executor.BlockingPool, f *os.File, off, n int64, writeErr chan<- error, done chan<- error) Handler {
	return &HandlerFuncs{Open: func(c *Conn) {
		c.WriteString("head:")
		err := c.SendFile(pool, f, off, n, func(sent int64, err error) {
			if err == nil && sent != n {
				err = errors.New("sent a wrong count")
			}
			if err == nil {
				_, err = c.WriteString(":tail")
				c.Close()
			}
			done <- err
		})
		if err != nil {
			done <- err
			return
		}
		_, werr := c.Write([]byte("x"))
		writeErr <- werr
		c.Close() // must wait for the file and the tail
	}}
}

// The bytes of the file arrive exactly, between what was written before
// and after, on plaintext (zero-copy) and TLS (copy) connections, for an
// empty part, a small one (copied) and parts of several pipe loads.
func TestSendFileSendsExactBytes(t *testing.T) {
	data := patterned(1<<20 + 4099)
	cases := []struct {
		name   string
		off, n int64
	}{
		{"empty", 0, 0},
		{"small", 100, 5000},
		{"whole", 0, int64(len(data))},
		{"middle", 12345, 700 << 10},
	}
	forEachBackend(t, func(t *testing.T, b Backend) {
		pool := newTestPool(t)
		f := fileOf(t, data)
		for _, secure := range []bool{false, true} {
			for _, tc := range cases {
				name := tc.name
				if secure {
					name += "/tls"
				}
				t.Run(name, func(t *testing.T) {
					writeErr, done := make(chan error, 1), make(chan error, 1)
					h := sendFileHandler(t, pool, f, tc.off, tc.n, writeErr, done)
					var got []byte
					var err error
					if secure {
						s := startTLS(t, b, WithTLSHandshakeOffLoop(false), h, nil)
						got, err = io.ReadAll(dialTLS(t, s, nil))
					} else {
						s := startServer(t, b, h)
						got, err = io.ReadAll(dial(t, s))
					}
					require.NoError(t, err)
					require.NoError(t, await(t, done, "done"))
					require.ErrorIs(t, await(t, writeErr, "write during the send"), ErrSendingFile)
					want := append(append([]byte("head:"), data[tc.off:tc.off+tc.n]...), ":tail"...)
					require.Equal(t, len(want), len(got))
					require.True(t, bytes.Equal(want, got), "bytes differ")
				})
			}
		}
	})
}

// A file shorter than the part asked for aborts the connection: the peer
// gets fewer bytes and then the end, and done gets the cause.
func TestSendFileShortFileAborts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		pool := newTestPool(t)
		f := fileOf(t, patterned(100<<10))
		writeErr, done := make(chan error, 1), make(chan error, 1)
		s := startServer(t, b, sendFileHandler(t, pool, f, 0, 200<<10, writeErr, done))
		got, _ := io.ReadAll(dial(t, s))
		require.ErrorIs(t, await(t, done, "done"), io.ErrUnexpectedEOF)
		require.Less(t, len(got), 200<<10)
	})
}

// A client that resets in the middle of a large file releases the
// socket's duplicate and every descriptor: done reports the cause, and after the server
// stops the process has no more descriptors than before.
func TestSendFileClientResetReleases(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		pool := newTestPool(t)
		name := filepath.Join(t.TempDir(), "big")
		require.NoError(t, os.WriteFile(name, patterned(32<<20), 0o600))
		before := backendtest.CountFDs(t)
		done := make(chan error, 4)
		s, err := Listen("tcp", "127.0.0.1:0", &HandlerFuncs{Open: func(c *Conn) {
			f, err := os.Open(name)
			if err != nil {
				done <- err
				return
			}
			if err := c.SendFile(pool, f, 0, 32<<20, func(_ int64, err error) {
				f.Close()
				done <- err
			}); err != nil {
				f.Close()
				done <- err
			}
		}}, WithBackend(b), WithLoops(2), WithLogger(testLogger(t)))
		require.NoError(t, err)
		for range 3 {
			c, err := net.Dial("tcp", s.Addr().String())
			require.NoError(t, err)
			_, err = io.ReadFull(c, make([]byte, 1<<20))
			require.NoError(t, err)
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
			require.Error(t, await(t, done, "done after the reset"))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
		// Only more descriptors afterwards is a leak: an idle pipe another
		// test's loop pooled may be trimmed meanwhile.
		// A task still on the pool when the loops stopped releases its
		// descriptor when it returns.
		require.Eventually(t, func() bool { return backendtest.CountFDs(t) <= before }, 10*time.Second, 5*time.Millisecond)
	})
}

// SendFile refuses bad arguments and a second send, and the refusal
// leaves the connection usable.
func TestSendFileRefuses(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		pool := newTestPool(t)
		f := fileOf(t, patterned(64<<10))
		errs := make(chan []error, 1)
		s := startServer(t, b, &HandlerFuncs{Open: func(c *Conn) {
			nop := func(int64, error) {}
			var got []error
			got = append(got, c.SendFile(pool, f, -1, 10, nop))
			got = append(got, c.SendFile(nil, f, 0, 10, nop))
			got = append(got, c.SendFile(pool, f, 0, 64<<10, func(_ int64, err error) {
				if err == nil {
					c.WriteString("!")
					c.Close()
				}
			}))
			got = append(got, c.SendFile(pool, f, 0, 10, nop))
			errs <- got
		}})
		cl := dial(t, s)
		got := await(t, errs, "refusals")
		require.Error(t, got[0])
		require.Error(t, got[1])
		require.NoError(t, got[2])
		require.ErrorIs(t, got[3], ErrSendingFile)
		all, err := io.ReadAll(cl)
		require.NoError(t, err)
		require.Len(t, all, 64<<10+1)
	})
}

// A file that is not in the page cache is sent from the blocking pool
// (the disk read must not run on the loop), with the same bytes.
func TestSendFileFromDiskUsesPool(t *testing.T) {
	data := patterned(3<<20 + 517)
	forEachBackend(t, func(t *testing.T, b Backend) {
		pool := newTestPool(t)
		f := fileOf(t, data)
		evict := func() {
			w, err := os.OpenFile(f.Name(), os.O_RDWR, 0)
			require.NoError(t, err)
			defer w.Close()
			require.NoError(t, w.Sync())
			require.NoError(t, unix.Fadvise(int(w.Fd()), 0, 0, unix.FADV_DONTNEED))
			if cached, _ := pageCached(int(w.Fd()), 0, int64(len(data))); cached {
				t.Skip("the file system keeps the file's pages (tmpfs?): cannot test the uncached path here")
			}
		}
		evict()
		writeErr, done := make(chan error, 1), make(chan error, 1)
		s := startServer(t, b, sendFileHandler(t, pool, f, 0, int64(len(data)), writeErr, done))
		got, err := io.ReadAll(dial(t, s))
		require.NoError(t, err)
		require.NoError(t, await(t, done, "done"))
		want := append(append([]byte("head:"), data...), ":tail"...)
		require.True(t, bytes.Equal(want, got), "bytes differ")
		require.NotZero(t, pool.Stats().Completed, "no send ran on the pool")
	})
}

// With half the descriptor table in use, a send that needs the pool gets
// no duplicate of the socket and falls back to copying through the output
// queue, with the same bytes.
func TestSendFileWithoutDescriptorCopies(t *testing.T) {
	data := patterned(3<<20 + 11)
	forEachBackend(t, func(t *testing.T, b Backend) {
		pool := newTestPool(t)
		f := fileOf(t, data)
		w, err := os.OpenFile(f.Name(), os.O_RDWR, 0)
		require.NoError(t, err)
		require.NoError(t, w.Sync())
		require.NoError(t, unix.Fadvise(int(w.Fd()), 0, 0, unix.FADV_DONTNEED))
		cached, _ := pageCached(int(w.Fd()), 0, int64(len(data)))
		w.Close()
		if cached {
			t.Skip("the file system keeps the file's pages (tmpfs?): the send would not need the pool")
		}
		writeErr, done := make(chan error, 1), make(chan error, 1)
		s := startServer(t, b, sendFileHandler(t, pool, f, 0, int64(len(data)), writeErr, done))
		// The next descriptors (the client's socket, the accepted one, a
		// duplicate) are all in the upper half of the soft limit from now
		// on. No test of this package runs in parallel.
		probe, err := os.Open(os.DevNull)
		require.NoError(t, err)
		next := probe.Fd()
		probe.Close()
		var old unix.Rlimit
		require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &old))
		lim := old
		lim.Cur = uint64(2*next + 2) // the duplicate, next+2 or later, is past half
		require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &lim))
		defer unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
		got, err := io.ReadAll(dial(t, s))
		require.NoError(t, err)
		require.NoError(t, await(t, done, "done"))
		want := append(append([]byte("head:"), data...), ":tail"...)
		require.True(t, bytes.Equal(want, got), "bytes differ")
		var peak int64
		for _, st := range s.Stats() {
			peak = max(peak, st.PeakConnOutput)
		}
		require.Greater(t, peak, int64(16<<10), "the file did not go through the output queue")
	})
}
