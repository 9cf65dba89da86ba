package net

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
)

// The peer's FIN reaches an EOFHandler, which can still write; and a
// server-side CloseWrite gives the client EOF while it can still send.
func TestHalfClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		var got bytes.Buffer
		var mu sync.Mutex
		h := &HandlerFuncs{
			Data: func(c *Conn) {
				p, _ := c.Next(-1)
				mu.Lock()
				got.Write(p)
				mu.Unlock()
			},
			EOF: func(c *Conn) {
				mu.Lock()
				n := got.Len()
				mu.Unlock()
				c.Write([]byte("got " + strconv.Itoa(n)))
				c.CloseWrite()
			},
		}
		s := startServer(t, b, h)
		c := dial(t, s)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		payload := bytes.Repeat([]byte("x"), 100000)
		if _, err := c.Write(payload); err != nil {
			t.Fatal(err)
		}
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		reply, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		if string(reply) != "got 100000" {
			t.Fatalf("reply %q", reply)
		}
		waitConns(t, s, 0)
	})
	forEachBackend(t, func(t *testing.T, b Backend) {
		// Server half-closes first; the client keeps sending afterwards.
		received := make(chan int, 1)
		total := 0
		h := &HandlerFuncs{
			Open: func(c *Conn) { c.Write([]byte("hello")); c.CloseWrite() },
			Data: func(c *Conn) { total += c.Discard(-1 + c.Buffered() + 1) },
			EOF:  func(c *Conn) { received <- total; c.Close() },
		}
		s := startServer(t, b, h)
		c := dial(t, s)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		greeting, err := io.ReadAll(c) // ends at the server's FIN
		if err != nil || string(greeting) != "hello" {
			t.Fatalf("greeting %q %v", greeting, err)
		}
		if _, err := c.Write(make([]byte, 5000)); err != nil {
			t.Fatal(err)
		}
		c.(*net.TCPConn).CloseWrite()
		n := await(t, received, "server never saw the client's FIN")
		if n != 5000 {
			t.Fatalf("server received %d after its half-close, want 5000", n)
		}
	})
}

// A client that resets mid-stream: the server sees an error in OnClose,
// the connection is released, and the loop keeps serving others.
func TestResetMidStream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		closed := make(chan error, 1)
		h := &HandlerFuncs{
			Data: func(c *Conn) {
				c.Discard(c.Buffered())
				c.Write(make([]byte, 256<<10)) // keep output pending
			},
			Close: func(c *Conn, err error) { closed <- err },
		}
		s := startServer(t, b, h, WithLoops(1))
		c := dial(t, s)
		c.Write([]byte("go"))
		buf := make([]byte, 1000)
		io.ReadFull(c, buf) // the stream is flowing
		c.(*net.TCPConn).SetLinger(0)
		c.Close() // RST
		err := await(t, closed, "server did not notice the reset")
		if err == nil {
			t.Fatal("OnClose got nil after a reset")
		}
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, io.EOF) {
			t.Logf("reset reported as %v", err)
		}
		waitConns(t, s, 0)
		// The loop still serves new connections.
		c2 := dial(t, s)
		c2.Write([]byte("x"))
		c2.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c2, buf[:10]); err != nil {
			t.Fatalf("loop stopped serving after a reset: %v", err)
		}
	})
}

// A client that sends 8 MiB without reading: the server stops reading
// from it (backpressure), keeps its pending output bounded, and once the
// client reads, every byte comes back in order.
func TestSlowReaderBackpressure(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		const low, high = 64 << 10, 256 << 10
		var maxPending atomic.Int64
		h := &HandlerFuncs{Data: func(c *Conn) {
			p, _ := c.Next(-1)
			c.Write(p)
			if n := int64(c.OutputBuffered()); n > maxPending.Load() {
				maxPending.Store(n)
			}
		}}
		s := startServer(t, b, h, WithLoops(1), WithWriteWaterMarks(low, high))
		c := dial(t, s)
		c.SetDeadline(time.Now().Add(60 * time.Second))
		const total = 8 << 20
		payload := make([]byte, total)
		for i := range payload {
			payload[i] = byte(i * 7)
		}
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		werr := make(chan error, 1)
		go func() { _, err := c.Write(payload); werr <- err }()
		// Not reading: wait until the output crossed the high-water mark,
		// which stops the server's reading of this peer.
		require.Eventually(t, func() bool { return maxPending.Load() > high }, 20*time.Second, time.Millisecond,
			"the output never crossed the high-water mark")
		var during runtime.MemStats
		runtime.GC() // count live memory, not garbage
		runtime.ReadMemStats(&during)
		st := s.Stats()[0]
		if st.BytesIn >= total {
			t.Fatalf("server read all %d bytes from a peer that never read: no backpressure", st.BytesIn)
		}
		got, err := readFull(c, total)
		if err != nil {
			t.Fatal(err)
		}
		if err := <-werr; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatal("echoed bytes differ")
		}
		// Pending output may overshoot high by what was already received
		// when reading paused: at most the recv buffers in flight.
		limit := int64(high + 4<<20 + 512<<10)
		if m := maxPending.Load(); m > limit {
			t.Fatalf("pending output reached %d, bound %d", m, limit)
		}
		growth := int64(during.HeapAlloc) - int64(before.HeapAlloc)
		// The test's own 8 MiB payload is allocated before "before"; the
		// client goroutine's socket buffers are kernel memory.
		if growth > 16<<20 {
			t.Fatalf("heap grew %d bytes while the peer did not read", growth)
		}
		t.Logf("read before pause: %d bytes, max pending output %d, heap growth %d", st.BytesIn, maxPending.Load(), growth)
	})
}

// 10,000 short-lived connections leave no descriptor behind.
func TestShortLivedConnsNoFDLeak(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		s := startServer(t, b, echoHandler())
		n := 10000
		if testing.Short() || raceEnabled {
			n = 3000
		}
		runtime.GC()
		base := backendtest.CountFDs(t)
		var wg sync.WaitGroup
		var fails atomic.Int64
		work := make(chan int)
		for w := 0; w < 32; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 4)
				for range work {
					c, err := net.Dial("tcp", s.Addr().String())
					if err != nil {
						fails.Add(1)
						continue
					}
					c.SetDeadline(time.Now().Add(10 * time.Second))
					if _, err := c.Write([]byte("ping")); err != nil {
						fails.Add(1)
					} else if _, err := io.ReadFull(c, buf); err != nil {
						fails.Add(1)
					}
					c.Close()
				}
			}()
		}
		for i := 0; i < n; i++ {
			work <- i
		}
		close(work)
		wg.Wait()
		if f := fails.Load(); f != 0 {
			t.Fatalf("%d of %d connections failed", f, n)
		}
		waitConns(t, s, 0)
		if after := backendtest.CountFDs(t); after > base {
			t.Fatalf("fd count %d after %d connections, baseline %d", after, n, base)
		}
		var accepted uint64
		for _, st := range s.Stats() {
			accepted += st.Accepted
		}
		if accepted < uint64(n) {
			t.Fatalf("accepted %d of %d", accepted, n)
		}
	})
}

// AsyncWrite from 100 goroutines: each goroutine's writes arrive in order.
func TestAsyncWriteOrderPerGoroutine(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		conns := make(chan *Conn, 1)
		s := startServer(t, b, &HandlerFuncs{Open: func(c *Conn) { conns <- c }})
		c := dial(t, s)
		sc := <-conns
		const writers, per = 100, 200
		var wg sync.WaitGroup
		for g := 0; g < writers; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < per; i++ {
					if err := sc.AsyncWrite([]byte(fmt.Sprintf("%d %d\n", g, i)), nil); err != nil {
						t.Error(err)
						return
					}
				}
			}(g)
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		next := make([]int, writers)
		sc2 := bufio.NewScanner(c)
		for n := 0; n < writers*per; n++ {
			if !sc2.Scan() {
				t.Fatalf("after %d lines: %v", n, sc2.Err())
			}
			var g, i int
			if _, err := fmt.Sscanf(sc2.Text(), "%d %d", &g, &i); err != nil {
				t.Fatalf("line %q: %v", sc2.Text(), err)
			}
			if i != next[g] {
				t.Fatalf("goroutine %d: got write %d, want %d", g, i, next[g])
			}
			next[g]++
		}
		wg.Wait()
	})
}

// Dial from the server's loops to a standard-library listener, and a
// handler that dials from inside the loop (the proxy pattern).
func TestDial(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { io.Copy(c, c); c.Close() }()
			}
		}()
		s := startServer(t, b, echoHandler())
		got := make(chan string, 1)
		h := &HandlerFuncs{
			Open: func(c *Conn) { c.Write([]byte("ping")) },
			Data: func(c *Conn) {
				if c.Buffered() >= 4 {
					p, _ := c.Next(4)
					got <- string(p)
					c.Close()
				}
			},
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := s.Dial(ctx, "tcp", ln.Addr().String(), h)
		if err != nil {
			t.Fatal(err)
		}
		if c.RemoteAddr().String() != ln.Addr().String() {
			t.Errorf("RemoteAddr %v, want %v", c.RemoteAddr(), ln.Addr())
		}
		select {
		case p := <-got:
			if p != "ping" {
				t.Fatalf("got %q", p)
			}
		case <-ctx.Done():
			t.Fatal("no echo through the dialed connection")
		}
		// A refused port fails with a clear error.
		dead, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := dead.Addr().String()
		dead.Close()
		if _, err := s.Dial(ctx, "tcp", addr, &HandlerFuncs{}); !errors.Is(err, errConnRefused) {
			t.Fatalf("dial to a closed port: %v, want ECONNREFUSED", err)
		}
		// Dial from within a handler: the loop forwards one message.
		fwd := startServer(t, b, &HandlerFuncs{Data: func(c *Conn) {
			p, _ := c.Next(-1)
			msg := append([]byte(nil), p...)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel() // the connect reads its deadline once, on the loop
			_, err := c.Loop().Dial(ctx, "tcp", ln.Addr().String(), &HandlerFuncs{
				Open: func(up *Conn) { up.Write(msg) },
				Data: func(up *Conn) {
					r, _ := up.Next(-1)
					c.Write(r)
					if c.OutputBuffered() >= len(msg) {
						up.Close()
					}
				},
			})
			if err != nil {
				c.Write([]byte("dial error: " + err.Error()))
			}
		}})
		cc := dial(t, fwd)
		cc.SetDeadline(time.Now().Add(10 * time.Second))
		cc.Write([]byte("via-loop"))
		p, err := readFull(cc, 8)
		if err != nil || string(p) != "via-loop" {
			t.Fatalf("forwarded %q %v", p, err)
		}
	})
}

// Per-connection timers fire on the loop; stopped ones do not; the idle
// timeout closes silent connections.
func TestTimers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		h := &HandlerFuncs{Open: func(c *Conn) {
			stopped := c.AfterFunc(20*time.Millisecond, func() { c.Write([]byte("never")) })
			c.AfterFunc(50*time.Millisecond, func() { c.Write([]byte("tick")) })
			stopped.Stop()
		}}
		s := startServer(t, b, h)
		c := dial(t, s)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		p, err := readFull(c, 4)
		if err != nil || string(p) != "tick" {
			t.Fatalf("got %q %v", p, err)
		}

		idle := startServer(t, b, echoHandler(), WithConnIdleTimeout(100*time.Millisecond))
		ic := dial(t, idle)
		ic.SetDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		if _, err := ic.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("idle connection: read %v, want EOF", err)
		}
		if time.Since(start) < 80*time.Millisecond {
			t.Fatalf("closed after %v, before the idle timeout", time.Since(start))
		}

		// Activity after a long park restarts the idle clock: the loop must
		// stamp it with the time the data arrived, not the time it parked.
		slow := startServer(t, b, echoHandler(), WithConnIdleTimeout(400*time.Millisecond), WithLoops(1))
		sc := dial(t, slow)
		sc.SetDeadline(time.Now().Add(5 * time.Second))
		time.Sleep(300 * time.Millisecond) // a quiet spell (elapsed time under test, not a wait for an event)
		sc.Write([]byte("alive"))
		if _, err := readFull(sc, 5); err != nil {
			t.Fatalf("echo after a quiet spell: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // elapsed time under test: 500 ms since open, 200 ms since activity
		sc.Write([]byte("still"))
		if p, err := readFull(sc, 5); err != nil || string(p) != "still" {
			t.Fatalf("connection active 200 ms ago was closed as idle: %q %v", p, err)
		}
	})
}

// Shutdown with live connections: listeners stop at once, connections that
// stay open are cut at the deadline, and every fd is released.
func TestShutdownWithLiveConnections(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		runtime.GC()
		base := backendtest.CountFDs(t)
		s, err := Listen("tcp", "127.0.0.1:0", echoHandler(), WithBackend(b), WithLoops(2), WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		var clients []net.Conn
		for i := 0; i < 10; i++ {
			c := dial(t, s)
			clients = append(clients, c)
		}
		waitConns(t, s, 10)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown: %v, want DeadlineExceeded", err)
		}
		if d := time.Since(start); d < 150*time.Millisecond {
			t.Fatalf("Shutdown returned after %v without waiting for connections", d)
		}
		for _, c := range clients {
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Fatal("client still connected after Shutdown")
			}
			c.Close()
		}
		if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
			t.Fatal("listener still accepting after Shutdown")
		}
		for _, l := range s.Loops() {
			select {
			case <-l.Done():
			default:
				t.Fatal("loop still running after Shutdown")
			}
		}
		if after := backendtest.CountFDs(t); after > base {
			t.Fatalf("fds: %d after Shutdown, %d before the server", after, base)
		}

		// Graceful: connections that finish within the grace period.
		s2, _ := Listen("tcp", "127.0.0.1:0", echoHandler(), WithBackend(b), WithLoops(1), WithLogger(testLogger(t)))
		c, _ := net.Dial("tcp", s2.Addr().String())
		waitConns(t, s2, 1)
		ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel2()
		shut := make(chan error, 1)
		go func() { shut <- s2.Shutdown(ctx2) }()
		// Close the client once Shutdown is waiting for it: its listener
		// is closed by then.
		require.Eventually(t, func() bool {
			probe, err := net.Dial("tcp", s2.Addr().String())
			if err == nil {
				probe.Close()
			}
			return err != nil
		}, 5*time.Second, time.Millisecond)
		c.Close()
		if err := await(t, shut, "graceful Shutdown did not return"); err != nil {
			t.Fatalf("graceful Shutdown: %v", err)
		}
	})
}

// A panicking handler closes only its own connection.
func TestPanicIsolation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		closeErr := make(chan error, 4)
		h := &HandlerFuncs{
			Data: func(c *Conn) {
				p, _ := c.Next(-1)
				if bytes.Contains(p, []byte("boom")) {
					panic("handler exploded")
				}
				c.Write(p)
			},
			Close: func(c *Conn, err error) { closeErr <- err },
		}
		s := startServer(t, b, h, WithLoops(1))
		good := dial(t, s)
		bad := dial(t, s)
		bad.Write([]byte("boom"))
		bad.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := bad.Read(make([]byte, 1)); err == nil {
			t.Fatal("panicking connection was not closed")
		}
		if err := <-closeErr; !errors.Is(err, ErrHandlerPanic) {
			t.Fatalf("OnClose error %v, want ErrHandlerPanic", err)
		}
		good.SetDeadline(time.Now().Add(5 * time.Second))
		good.Write([]byte("still here"))
		p, err := readFull(good, 10)
		if err != nil || string(p) != "still here" {
			t.Fatalf("other connection on the loop: %q %v", p, err)
		}
		if n := s.Stats()[0].Panics; n != 1 {
			t.Fatalf("Stats.Panics = %d", n)
		}
	})
}

// Many goroutines post to a loop that parks between bursts: nothing is
// lost and everything runs on the loop.
func TestWakeupStorm(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		l, err := NewLoop(0, Config{Backend: b, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		const posters, per = 64, 2000
		count := 0 // loop-owned: only posted closures touch it
		var wg sync.WaitGroup
		for p := 0; p < posters; p++ {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				for i := 0; i < per; i++ {
					if err := l.Post(func() { count++ }); err != nil {
						t.Error(err)
						return
					}
					if i%(100+p) == 0 {
						time.Sleep(time.Duration(p%3) * 100 * time.Microsecond) // let the loop park
					}
				}
			}(p)
		}
		wg.Wait()
		done := make(chan int)
		l.Post(func() { done <- count })
		n := await(t, done, "loop never ran the final post: lost wake-up")
		if n != posters*per {
			t.Fatalf("ran %d of %d posts", n, posters*per)
		}
		st := l.Stats()
		t.Logf("posts %d, parks %d, wakeups %d", st.Posts, st.Parks, st.Wakeups)
		if st.Wakeups > st.Parks+1 {
			t.Fatalf("%d wake-up writes for %d parks: a running loop was woken", st.Wakeups, st.Parks)
		}
	})
}

// Unix sockets and IPv6 loopback serve like TCP over IPv4.
func TestUnixAndIPv6(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		cases := []struct{ network, addr string }{
			{"unix", filepath.Join(backendtest.TempDir(t), "veloq.sock")},
			{"tcp6", "[::1]:0"},
		}
		for _, tc := range cases {
			if tc.network == "unix" && backendtest.Wine() {
				t.Log("skipping unix: Wine has no AF_UNIX sockets")
				continue
			}
			s, err := Listen(tc.network, tc.addr, echoHandler(), WithBackend(b), WithLoops(2), WithLogger(testLogger(t)))
			if err != nil {
				if tc.network == "tcp6" {
					t.Logf("no IPv6 loopback: %v", err)
					continue
				}
				t.Fatal(err)
			}
			c, err := net.Dial(tc.network, s.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			c.Write([]byte("over " + tc.network))
			p, err := readFull(c, len("over ")+len(tc.network))
			if err != nil || !strings.HasSuffix(string(p), tc.network) {
				t.Fatalf("%s: %q %v", tc.network, p, err)
			}
			c.Close()
			s.Close()
		}
	})
}

// Input the handler never consumes is bounded by the read buffer cap.
func TestReadBufferCap(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		closed := make(chan error, 1)
		h := &HandlerFuncs{Close: func(c *Conn, err error) { closed <- err }} // never consumes
		s := startServer(t, b, h, WithReadBufferCap(64<<10))
		c := dial(t, s)
		go c.Write(make([]byte, 1<<20))
		err := await(t, closed, "connection over the cap stayed open")
		if !errors.Is(err, ErrInputTooLarge) {
			t.Fatalf("OnClose: %v, want ErrInputTooLarge", err)
		}
	})
}

// Balancing with one acceptor spreads connections over loops.
func TestBalanceOneAcceptor(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		for _, bal := range []Balance{BalanceRoundRobin, BalanceLeastConns} {
			s := startServer(t, b, echoHandler(), WithBalance(bal), WithLoops(2))
			var cs []net.Conn
			for i := 0; i < 10; i++ {
				c := dial(t, s)
				cs = append(cs, c)
			}
			waitConns(t, s, 10)
			for _, l := range s.Loops() {
				if n := l.NumConns(); n < 3 {
					t.Errorf("balance %d: loop %d has %d of 10 connections", bal, l.ID(), n)
				}
			}
			for _, c := range cs {
				c.Close()
			}
		}
	})
}

func waitConns(t *testing.T, s *Server, want int) {
	t.Helper()
	require.Eventually(t, func() bool { return s.NumConns() == want }, 10*time.Second, 2*time.Millisecond,
		"server connections never reached %d", want)
}
