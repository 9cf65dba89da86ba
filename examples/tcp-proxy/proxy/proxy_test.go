//go:build unix

package proxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/examples/tcp-proxy/proxy"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

var spliceModes = []proxy.SpliceMode{proxy.SpliceOff, proxy.SpliceLarge, proxy.SpliceAlways}

// forEach runs f for every reactor backend and splice mode.
func forEach(t *testing.T, f func(t *testing.T, b vnet.Backend, m proxy.SpliceMode)) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		for _, m := range spliceModes {
			t.Run("splice="+m.String(), func(t *testing.T) { f(t, b, m) })
		}
	})
}

// logBuffer collects log lines, safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// server starts a veloq server for h on 127.0.0.1 and shuts it down at
// the end of the test (after the test's own cleanups registered later,
// such as client connections).
func server(t *testing.T, b vnet.Backend, h vnet.Handler, loops int) *vnet.Server {
	t.Helper()
	s, err := vnet.Listen("tcp", "127.0.0.1:0", h, vnet.WithBackend(b), vnet.WithLoops(loops), vnet.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// echoServer is a veloq echo server that passes a FIN back.
func echoServer(t *testing.T, b vnet.Backend) *vnet.Server {
	return server(t, b, &vnet.HandlerFuncs{
		Data: func(c *vnet.Conn) {
			in, _ := c.Next(-1)
			c.Write(in)
		},
		EOF: func(c *vnet.Conn) { c.CloseWrite() },
	}, 2)
}

func startProxy(t *testing.T, b vnet.Backend, backends []string, opts ...proxy.Option) (*proxy.Proxy, *vnet.Server) {
	t.Helper()
	opts = append([]proxy.Option{proxy.WithLogger(quiet())}, opts...)
	p, err := proxy.New(backends, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p, server(t, b, p, 2)
}

func dial(t *testing.T, addr net.Addr) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(60 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 42))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// exchange writes data and half-closes (from a goroutine, so neither
// direction has to fit in buffers), reads until EOF and checks the echo.
func exchange(c *net.TCPConn, data []byte) error {
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.CloseWrite()
		}
		werr <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		return fmt.Errorf("read after %d of %d bytes: %w", len(got), len(data), err)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("echo differs: %d bytes back, %d sent", len(got), len(data))
	}
	return nil
}

// eventually polls cond until it holds or 20 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 20*time.Second, 5*time.Millisecond, "timed out waiting for: %s", what)
}

// 1000 concurrent streams of random sizes go through the proxy to an
// echo server and come back byte for byte, each ending with a FIN that
// crossed the proxy both ways.
func TestThousandStreamsExact(t *testing.T) {
	const streams = 1000
	raiseFDLimit(t, 8*streams)
	forEach(t, func(t *testing.T, b vnet.Backend, m proxy.SpliceMode) {
		echo := echoServer(t, b)
		p, s := startProxy(t, b, []string{echo.Addr().String()}, proxy.WithSplice(m))
		var wg sync.WaitGroup
		errs := make(chan error, streams)
		var total uint64
		for i := range streams {
			size := 1 + int(rand.Uint32N(48<<10))
			if i%100 == 0 {
				size = 512 << 10 // a few large ones, which SpliceLarge splices
			}
			total += uint64(size)
			wg.Go(func() {
				c, err := net.Dial("tcp", s.Addr().String())
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(60 * time.Second))
				if err := exchange(c.(*net.TCPConn), randomBytes(uint64(i), size)); err != nil {
					errs <- fmt.Errorf("stream %d (%d bytes): %w", i, size, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		n := 0
		for err := range errs {
			if n++; n <= 5 {
				t.Error(err)
			}
		}
		if n > 0 {
			t.Fatalf("%d of %d streams failed", n, streams)
		}
		eventually(t, "every pair closed", func() bool { return p.Stats().Active == 0 && s.NumConns() == 0 })
		st := p.Stats()
		if st.Accepted != streams || st.Connected != streams || st.DialFailures != 0 {
			t.Errorf("stats %+v: want %d accepted and connected, no dial failure", st, streams)
		}
		if st.BytesUp != total || st.BytesDown != total {
			t.Errorf("bytes up %d, down %d; want %d each", st.BytesUp, st.BytesDown, total)
		}
	})
}

func raiseFDLimit(t *testing.T, need uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// Nothing to raise: the os package raises the soft limit to the hard
	// one when the process starts (Go 1.19). The conversion is for
	// FreeBSD, whose limits are signed.
	if uint64(lim.Cur) < need {
		t.Skipf("needs %d descriptors; RLIMIT_NOFILE allows %d", need, lim.Cur)
	}
}

// listen opens a stdlib listener whose connections h serves.
func listen(t *testing.T, h func(c *net.TCPConn)) net.Addr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				h(c.(*net.TCPConn))
			})
		}
	})
	return ln.Addr()
}

// Half-close crosses the proxy in both directions: the client's FIN
// reaches the backend while the backend still answers, and the backend's
// FIN reaches the client while the client still sends.
func TestHalfClose(t *testing.T) {
	forEach(t, func(t *testing.T, b vnet.Backend, m proxy.SpliceMode) {
		t.Run("client first", func(t *testing.T) {
			backend := listen(t, func(c *net.TCPConn) {
				req, err := io.ReadAll(c) // to the client's FIN
				if err != nil {
					return
				}
				c.Write([]byte("got " + string(req)))
			})
			_, s := startProxy(t, b, []string{backend.String()}, proxy.WithSplice(m))
			c := dial(t, s.Addr())
			c.Write([]byte("request"))
			c.CloseWrite()
			resp, err := io.ReadAll(c)
			if err != nil || string(resp) != "got request" {
				t.Fatalf("client read %q, %v; want the answer after its FIN, then EOF", resp, err)
			}
		})
		t.Run("backend first", func(t *testing.T) {
			got := make(chan string, 1)
			backend := listen(t, func(c *net.TCPConn) {
				c.Write([]byte("banner"))
				c.CloseWrite()
				rest, err := io.ReadAll(c)
				if err != nil {
					got <- err.Error()
					return
				}
				got <- string(rest)
			})
			p, s := startProxy(t, b, []string{backend.String()}, proxy.WithSplice(m))
			c := dial(t, s.Addr())
			banner, err := io.ReadAll(c)
			if err != nil || string(banner) != "banner" {
				t.Fatalf("client read %q, %v; want the banner, then EOF", banner, err)
			}
			c.Write([]byte("still talking"))
			c.CloseWrite()
			if r := <-got; r != "still talking" {
				t.Fatalf("backend read %q after its FIN", r)
			}
			eventually(t, "the pair closed", func() bool { return p.Stats().Active == 0 })
		})
	})
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// expectClosed checks that the proxy closes c without sending anything.
func expectClosed(t *testing.T, c *net.TCPConn) {
	t.Helper()
	c.Write([]byte("hello?"))
	n, err := c.Read(make([]byte, 16))
	if n != 0 || (err != io.EOF && !errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
	}
}

// A client whose backend refuses is closed, with a log line; with a
// second backend up, clients are served and the refusing backend is
// skipped during its cooldown.
func TestBackendDown(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		t.Run("only backend", func(t *testing.T) {
			var logs logBuffer
			p, err := proxy.New([]string{closedPort(t)}, proxy.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			s := server(t, b, p, 1)
			expectClosed(t, dial(t, s.Addr()))
			eventually(t, "the client closed", func() bool { return p.Stats().Active == 0 })
			st := p.Stats()
			if st.DialFailures != 1 || st.NoBackend != 1 || st.Connected != 0 {
				t.Errorf("stats %+v: want 1 dial failure, 1 client without backend", st)
			}
			for _, want := range []string{"backend connect failed", "connection refused", "closing client: no backend reachable"} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log lacks %q:\n%s", want, logs.String())
				}
			}
		})
		t.Run("one of two", func(t *testing.T) {
			echo := echoServer(t, b)
			p, s := startProxy(t, b, []string{closedPort(t), echo.Addr().String()}, proxy.WithCooldown(time.Hour))
			for i := range 10 {
				if err := exchange(dial(t, s.Addr()), []byte(fmt.Sprint("client ", i))); err != nil {
					t.Fatalf("client %d: %v", i, err)
				}
			}
			if st := p.Stats(); st.DialFailures != 1 || st.Connected != 10 || st.NoBackend != 0 {
				t.Errorf("stats %+v: want 1 dial failure (then skipped), 10 connected", st)
			}
		})
	})
}

// A backend that never completes the handshake makes the connect time
// out; the client is closed and the timeout logged.
func TestBackendConnectTimeout(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		_, addr := backendtest.FullAcceptQueue(t)
		var logs logBuffer
		p, err := proxy.New([]string{addr}, proxy.WithDialTimeout(200*time.Millisecond),
			proxy.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		s := server(t, b, p, 1)
		expectClosed(t, dial(t, s.Addr()))
		eventually(t, "the client closed", func() bool { return p.Stats().Active == 0 })
		if st := p.Stats(); st.DialFailures != 1 || st.NoBackend != 1 {
			t.Errorf("stats %+v: want 1 dial failure", st)
		}
		if !strings.Contains(logs.String(), vnet.ErrDialTimeout.Error()) {
			t.Errorf("log does not mention the timeout:\n%s", logs.String())
		}
	})
}

// A backend that reads nothing stalls the client: the proxy buffers at
// most its limit toward the backend, and its heap does not grow with what
// the client tries to send.
func TestSlowBackendBoundsMemory(t *testing.T) {
	forEach(t, func(t *testing.T, b vnet.Backend, m proxy.SpliceMode) {
		stall := make(chan struct{})
		backend := listen(t, func(c *net.TCPConn) {
			c.SetReadBuffer(64 << 10)
			<-stall // reads nothing until the test ends
		})
		const limit = 64 << 10
		p, s := startProxy(t, b, []string{backend.String()}, proxy.WithSplice(m), proxy.WithBufferLimit(limit))
		t.Cleanup(func() { close(stall) }) // before the proxy's shutdown, which waits for the pair
		data := make([]byte, 64<<20)
		c := dial(t, s.Addr())
		c.SetWriteBuffer(64 << 10)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		// The write cannot finish: the backend never reads. The deadline
		// only ends the attempt.
		c.SetWriteDeadline(time.Now().Add(3 * time.Second))
		n, err := c.Write(data)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write ended with %v after %d bytes, want the deadline (a stall)", err, n)
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		st := p.Stats()
		if st.PeakQueued > limit {
			t.Errorf("proxy queued %d bytes toward the backend, limit %d", st.PeakQueued, limit)
		}
		grew := int64(after.HeapInuse) - int64(before.HeapInuse)
		t.Logf("client wrote %d MiB before stalling (%v); heap grew %d KiB; peak queued %d KiB",
			n>>20, err, grew>>10, st.PeakQueued>>10)
		if grew > 16<<20 {
			t.Errorf("heap grew %d MiB while the client pushed %d MiB at a stalled backend", grew>>20, n>>20)
		}
		runtime.KeepAlive(data) // part of the baseline: it must not be freed in between
	})
}

// A client that resets mid-stream frees its backend connection.
func TestClientResetFreesBackend(t *testing.T) {
	forEach(t, func(t *testing.T, b vnet.Backend, m proxy.SpliceMode) {
		echo := echoServer(t, b)
		p, s := startProxy(t, b, []string{echo.Addr().String()}, proxy.WithSplice(m))
		for range 3 {
			c := dial(t, s.Addr())
			go c.Write(randomBytes(1, 1<<20))
			if _, err := io.ReadFull(c, make([]byte, 100<<10)); err != nil {
				t.Fatal(err)
			}
			if echo.NumConns() != 1 {
				t.Fatalf("echo server has %d connections, want 1", echo.NumConns())
			}
			c.SetLinger(0)
			c.Close()
			eventually(t, "the backend connection closed", func() bool { return echo.NumConns() == 0 })
		}
		eventually(t, "the proxy released the pairs", func() bool { return p.Stats().Active == 0 && s.NumConns() == 0 })
	})
}

// Backends are taken in turn.
func TestRoundRobin(t *testing.T) {
	var addrs []string
	for i := range 3 {
		addrs = append(addrs, listen(t, func(c *net.TCPConn) { fmt.Fprint(c, i) }).String())
	}
	_, s := startProxy(t, vnet.BackendEpoll, addrs)
	var got []string
	for range 6 {
		b, err := io.ReadAll(dial(t, s.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(b))
	}
	if g := strings.Join(got, ""); g != "012012" {
		t.Fatalf("backends answered in order %q, want 012012", g)
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	many := make([]string, 65)
	for i := range many {
		many[i] = "127.0.0.1:1"
	}
	for _, tc := range []struct {
		backends []string
		opts     []proxy.Option
		want     string
	}{
		{nil, nil, "no backends"},
		{[]string{"127.0.0.1"}, nil, "missing port"},
		{[]string{"127.0.0.1:0"}, nil, "non-zero port"},
		{many, nil, "at most 64"},
		{[]string{"127.0.0.1:1"}, []proxy.Option{proxy.WithDialTimeout(0)}, "dial timeout"},
		{[]string{"127.0.0.1:1"}, []proxy.Option{proxy.WithBufferLimit(10)}, "buffer limit"},
		{[]string{"127.0.0.1:1"}, []proxy.Option{proxy.WithSplice(7)}, "splice mode"},
	} {
		_, err := proxy.New(tc.backends, tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q): %v, want an error mentioning %q", tc.backends, err, tc.want)
		}
	}
	if _, err := proxy.ParseSpliceMode("sometimes"); err == nil {
		t.Error("ParseSpliceMode accepted sometimes")
	}
}
