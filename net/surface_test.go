package net

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/veloq/veloq/internal/backendtest"
)

// logBuffer is a log destination the test can read while loops write it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *logBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *logBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (w *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// closeRecorder is a struct Handler without OnEOF.
type closeRecorder struct{ closed chan closeInfo }

type closeInfo struct {
	err          error
	raddr, laddr net.Addr
}

func (h *closeRecorder) OnOpen(*Conn) {}
func (h *closeRecorder) OnData(c *Conn) {
	c.Discard(-1)
}
func (h *closeRecorder) OnClose(c *Conn, err error) {
	h.closed <- closeInfo{err, c.RemoteAddr(), c.LocalAddr()}
}

// The peer's close reaches OnClose as io.EOF for both handler shapes, and
// both addresses answer in OnClose although nothing asked for them
// before; after a reset too, when the kernel no longer knows the peer.
func TestOnCloseRuleAndAddrs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		for _, shape := range []string{"Handler", "HandlerFuncs"} {
			for _, how := range []string{"fin", "reset"} {
				t.Run(shape+"/"+how, func(t *testing.T) {
					closed := make(chan closeInfo, 1)
					var h Handler = &closeRecorder{closed: closed}
					if shape == "HandlerFuncs" {
						h = &HandlerFuncs{Close: func(c *Conn, err error) {
							closed <- closeInfo{err, c.RemoteAddr(), c.LocalAddr()}
						}}
					}
					s := startServer(t, b, h)
					c := dial(t, s)
					if how == "reset" {
						backendtest.SkipUnderWine(t, "a reset that arrived before the read reads as EOF")
						require.NoError(t, c.(*net.TCPConn).SetLinger(0))
					}
					_, err := c.Write([]byte("x"))
					require.NoError(t, err)
					require.NoError(t, c.Close())
					got := await(t, closed, "OnClose did not run")
					if how == "fin" {
						assert.ErrorIs(t, got.err, io.EOF)
					} else {
						assert.Error(t, got.err)
						assert.NotErrorIs(t, got.err, io.EOF)
					}
					require.NotNil(t, got.raddr, "RemoteAddr in OnClose")
					assert.Equal(t, c.LocalAddr().String(), got.raddr.String())
					require.NotNil(t, got.laddr, "LocalAddr in OnClose")
					assert.Equal(t, s.Addr().String(), got.laddr.String())
				})
			}
		}
	})
}

// Conn methods called from another goroutine report ErrNotOnLoop and send
// nothing; AsyncWrite from the same goroutine is the way, and works.
func TestOffLoopCallsFail(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		opened := make(chan *Conn, 1)
		s := startServer(t, b, &HandlerFuncs{Open: func(c *Conn) { opened <- c }})
		cl := dial(t, s)
		c := await(t, opened, "no OnOpen")

		n, err := c.WriteString("lost?\n")
		assert.ErrorIs(t, err, ErrNotOnLoop)
		assert.Zero(t, n)
		_, err = c.Write([]byte("lost?\n"))
		assert.ErrorIs(t, err, ErrNotOnLoop)
		_, err = c.Writev([][]byte{[]byte("lost?\n")})
		assert.ErrorIs(t, err, ErrNotOnLoop)
		assert.ErrorIs(t, c.CloseWrite(), ErrNotOnLoop)
		assert.ErrorIs(t, c.Close(), ErrNotOnLoop)

		done := make(chan error, 1)
		require.NoError(t, c.AsyncWrite([]byte("async\n"), func(err error) { done <- err }))
		require.NoError(t, await(t, done, "AsyncWrite did not complete"))
		line, err := bufio.NewReader(cl).ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "async\n", line, "the off-loop writes must not have reached the peer")
	})
}

// A second server on a port that is in use is refused, whatever the
// number of loops, unless both ask to share the port.
func TestListenOnBusyPortRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		first := startServer(t, b, echoHandler(), WithLoops(2))
		addr := first.Addr().String()
		for _, loops := range []int{1, 2, 3} {
			_, err := Listen("tcp", addr, echoHandler(), WithBackend(b), WithLoops(loops), WithLogger(testLogger(t)))
			require.Error(t, err, "%d loops", loops)
			assert.ErrorIs(t, err, errAddrInUse)
		}

		if runtime.GOOS == "windows" {
			_, err := Listen("tcp", "127.0.0.1:0", echoHandler(), WithBackend(b), WithPortSharing(true), WithLogger(testLogger(t)))
			require.ErrorIs(t, err, errors.ErrUnsupported, "Windows has no SO_REUSEPORT")
			return
		}
		shared := startServer(t, b, echoHandler(), WithLoops(2), WithPortSharing(true))
		again, err := Listen("tcp", shared.Addr().String(), echoHandler(),
			WithBackend(b), WithLoops(2), WithPortSharing(true), WithLogger(testLogger(t)))
		require.NoError(t, err, "sharing was asked for")
		require.NoError(t, again.Close())
	})
}

// Listen and Dial refuse a bad network or address with an error that
// names veloq (not an internal package) and, for a network other than
// TCP or Unix, matches ErrUnsupportedNetwork.
func TestBadAddressErrors(t *testing.T) {
	tests := []struct {
		name, network, address string
		is                     error  // nil: no sentinel to match
		contains               string // a part of the text
	}{
		{"udp", "udp", "127.0.0.1:0", ErrUnsupportedNetwork, "unsupported network"},
		{"no port", "tcp", "127.0.0.1", nil, "missing port"},
		{"tcp4 given IPv6", "tcp4", "[::1]:0", nil, "is not an IPv4 address"},
		{"unix path too long", "unix", "/tmp/" + strings.Repeat("x", 200), nil, "unix socket path too long"},
	}
	forEachBackend(t, func(t *testing.T, b Backend) {
		s := startServer(t, b, echoHandler(), WithLoops(1))
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := Listen(tt.network, tt.address, echoHandler(), WithBackend(b), WithLoops(1), WithLogger(testLogger(t)))
				requireAddressError(t, err, tt.is, tt.contains)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, err = s.Dial(ctx, tt.network, tt.address, &HandlerFuncs{})
				requireAddressError(t, err, tt.is, tt.contains)
			})
		}
	})
}

func requireAddressError(t *testing.T, err error, is error, contains string) {
	t.Helper()
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "veloq: "), "error text %q", err)
	require.Contains(t, err.Error(), contains)
	if is != nil {
		require.ErrorIs(t, err, is)
	}
}

// A relay that follows the half-close rule (EOF set: CloseWrite the other
// side) gets the backend's answer to a client that sent its request and
// half-closed at once, as printf ... | nc -q1 does.
func TestHalfCloseRelay(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		// The backend answers once it has the whole request (its EOF).
		backend := startServer(t, b, &HandlerFuncs{
			Open: func(c *Conn) { c.SetValue(&bytes.Buffer{}) },
			Data: func(c *Conn) {
				in, _ := c.Next(-1)
				c.Value().(*bytes.Buffer).Write(in)
			},
			EOF: func(c *Conn) {
				c.Write(append([]byte("got "), c.Value().(*bytes.Buffer).Bytes()...))
				c.Close()
			},
		})
		relay := startServer(t, b, relayHandler(backend.Addr().String()))
		c := dial(t, relay)
		_, err := c.Write([]byte("request"))
		require.NoError(t, err)
		require.NoError(t, c.(*net.TCPConn).CloseWrite())
		got, err := io.ReadAll(c)
		require.NoError(t, err)
		assert.Equal(t, "got request", string(got))
	})
}

// relayHandler is the README's relay: each client gets a backend
// connection on the same loop, bytes are copied both ways, and each FIN is
// passed on as a half-close instead of closing the pair.
func relayHandler(backendAddr string) Handler {
	pipe := func(to func() *Conn) *HandlerFuncs {
		return &HandlerFuncs{
			Data: func(c *Conn) {
				if dst := to(); dst != nil {
					c.ForwardTo(dst, -1)
				}
			},
			EOF: func(c *Conn) {
				if dst := to(); dst != nil {
					dst.CloseWrite()
				}
			},
			Close: func(c *Conn, err error) {
				if dst := to(); dst != nil && err != nil {
					dst.Abort(err)
				} else if dst != nil {
					dst.Close()
				}
			},
		}
	}
	return &HandlerFuncs{Open: func(client *Conn) {
		var backend *Conn
		client.SetHandler(pipe(func() *Conn { return backend }))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		bc, err := client.Loop().Dial(ctx, "tcp", backendAddr, pipe(func() *Conn { return client }))
		if err != nil {
			client.Abort(err)
			return
		}
		backend = bc
	}}
}

// After Offload, the rest of the input is hidden until the answer is
// written: a handler that keeps parsing cannot answer the next request
// first, even when both arrived in one segment.
func TestOffloadHidesTheRest(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		p := newPool(t)
		h := &HandlerFuncs{Data: func(c *Conn) {
			for {
				in, _ := c.Peek(-1)
				i := bytes.IndexByte(in, '\n')
				if i < 0 {
					return
				}
				line := string(in[:i+1])
				c.Discard(i + 1)
				if strings.HasPrefix(line, "slow") {
					Offload(context.Background(), p, c, func(context.Context) (string, error) {
						time.Sleep(20 * time.Millisecond) // the work being slow is the point
						return line, nil
					}, func(c *Conn, v string, err error) {
						c.WriteString(v)
					})
					continue // parsing on, as a careless handler would
				}
				c.WriteString(line)
			}
		}}
		s := startServer(t, b, h)
		c := dial(t, s)
		_, err := c.Write([]byte("slow 1\nfast 2\nslow 3\nfast 4\n"))
		require.NoError(t, err)
		got, err := readFull(c, len("slow 1\nfast 2\nslow 3\nfast 4\n"))
		require.NoError(t, err)
		assert.Equal(t, "slow 1\nfast 2\nslow 3\nfast 4\n", string(got))
	})
}

// A callback that blocks the loop is counted and logged once, with the
// handler's type, and the loop serves on afterwards.
func TestBlockedLoopReported(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		var logs logBuffer
		h := &closeRecorder{closed: make(chan closeInfo, 4)}
		blocker := &blockingHandler{closeRecorder: h}
		s := startServer(t, b, blocker, WithLoops(1), WithLogger(logs.logger()),
			WithLoopConfig(Config{BlockThreshold: 20 * time.Millisecond}))
		c := dial(t, s)
		_, err := c.Write([]byte("block"))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return s.Stats()[0].Blocked >= 1 }, 10*time.Second, 5*time.Millisecond)
		require.Eventually(t, func() bool { return strings.Contains(logs.String(), "blocked the loop") }, 10*time.Second, 5*time.Millisecond)
		assert.Contains(t, logs.String(), "OnData of *net.blockingHandler")
		assert.Equal(t, 1, strings.Count(logs.String(), "blocked the loop"))
	})
}

type blockingHandler struct{ *closeRecorder }

func (h *blockingHandler) OnData(c *Conn) {
	c.Discard(-1)
	time.Sleep(200 * time.Millisecond) // the blocking under test
}

// A handler that panics on every connection is logged with its stack, but
// at most once a second per loop; every panic is counted.
func TestPanicLogsBounded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		var logs logBuffer
		s := startServer(t, b, &HandlerFuncs{Data: func(c *Conn) { panic("boom") }},
			WithLoops(1), WithLogger(logs.logger()))
		const conns = 30
		for range conns {
			c := dial(t, s)
			_, err := c.Write([]byte("x"))
			require.NoError(t, err)
			_, err = io.ReadAll(c) // the panic closes it
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool { return s.Stats()[0].Panics == conns }, 10*time.Second, 5*time.Millisecond)
		out := logs.String()
		assert.Contains(t, out, "stack.0=") // a frame per attribute: see internal/panicstack
		assert.Contains(t, out, "surface_test.go")
		assert.NotContains(t, out, `\n`)
		assert.LessOrEqual(t, strings.Count(out, "handler panicked"), 3)
	})
}

// WithLoopConfig keeps the defaults it does not set: TCP_NODELAY stays on.
func TestWithLoopConfigKeepsDefaults(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		nodelay := make(chan int, 1)
		s := startServer(t, b, &HandlerFuncs{Open: func(c *Conn) {
			v, err := noDelay(c)
			if err != nil {
				v = -1
			}
			nodelay <- v
		}}, WithLoopConfig(Config{RecvBuffers: 64, RecvBufferSize: 8 << 10}))
		dial(t, s)
		assert.Equal(t, 1, await(t, nodelay, "no OnOpen"))

		s = startServer(t, b, &HandlerFuncs{Open: func(c *Conn) {
			v, _ := noDelay(c)
			nodelay <- v
		}}, WithLoopConfig(Config{RecvBuffers: 64}), WithNoDelay(false))
		dial(t, s)
		assert.Equal(t, 0, await(t, nodelay, "no OnOpen"))
	})
}

// A closed connection's error matches the standard library's, from writes
// and from Offload alike.
func TestErrClosedIsStd(t *testing.T) {
	assert.ErrorIs(t, ErrClosed, net.ErrClosed)
	forEachBackend(t, func(t *testing.T, b Backend) {
		p := newPool(t)
		res := make(chan [2]error, 1)
		s := startServer(t, b, &HandlerFuncs{Data: func(c *Conn) {
			c.Discard(-1)
			c.Close()
			_, werr := c.Write([]byte("late"))
			Offload(context.Background(), p, c, func(context.Context) (int, error) { return 0, nil },
				func(c *Conn, _ int, err error) { res <- [2]error{werr, err} })
		}})
		c := dial(t, s)
		_, err := c.Write([]byte("x"))
		require.NoError(t, err)
		got := await(t, res, "no continuation")
		assert.ErrorIs(t, got[0], net.ErrClosed)
		assert.ErrorIs(t, got[1], net.ErrClosed)
	})
}

// auto picks io_uring exactly when the probe (which includes a NOP
// through io_uring_enter) passes, and epoll otherwise.
func TestAutoFollowsProbe(t *testing.T) {
	s, err := Listen("tcp", "127.0.0.1:0", echoHandler(), WithLoops(1), WithLogger(testLogger(t)))
	require.NoError(t, err)
	defer s.Close()
	want := BackendEpoll
	if runtime.GOOS != "linux" {
		want = BackendPortable
	} else if ProbeUring() == nil {
		want = BackendUring
	}
	assert.Equal(t, want, s.Backend())
	assert.Equal(t, want, s.Stats()[0].Backend)
}

// A loop made with NewLoop sets TCP_NODELAY on its connections as a
// Server's loops do (it used to leave Nagle on: Config's zero value), and
// Config.Nagle leaves it off. The connections are dialed from the loop.
func TestNewLoopNoDelay(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close() // the option is read on the dialing side
			}
		}()
		for _, nagle := range []bool{false, true} {
			l, err := NewLoop(0, Config{Backend: b, Logger: testLogger(t), Nagle: nagle})
			require.NoError(t, err)
			nodelay := make(chan int, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = l.Dial(ctx, "tcp", ln.Addr().String(), &HandlerFuncs{Open: func(c *Conn) {
				v, err := noDelay(c)
				if err != nil {
					v = -1
				}
				nodelay <- v
			}})
			cancel()
			require.NoError(t, err)
			want := 1
			if nagle {
				want = 0
			}
			assert.Equal(t, want, await(t, nodelay, "no OnOpen"), "Nagle %v", nagle)
			l.Close()
		}
	})
}
