//go:build unix

package net

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/internal/backendtest"
)

// A connect the kernel completed is not aborted as timed out because the
// loop was busy when its timer came due. The loop is held in a handler
// (the way thousands of busy connections hold it) from before the
// handshake until after the timeout; the completion is then reported in
// an iteration whose timers run first. The handshake is delayed by a
// full accept queue, which drops the SYN: its retransmission, 1 s later,
// completes the connect while the handler waits for it in accept.
func TestDialNotTimedOutWhenLoopLate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		ln, addr := backendtest.FullAcceptQueue(t)
		const timeout = 500 * time.Millisecond // under the SYN's 1 s retransmission timeout
		var dialed time.Time
		opened := make(chan struct{})
		failed := make(chan error, 1)
		accepted := make(chan int, 1)
		s := startServer(t, b, &HandlerFuncs{Data: func(c *Conn) {
			p, _ := c.Next(-1)
			switch string(p) {
			case "dial":
				dialed = time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				_, err := c.Loop().Dial(ctx, "tcp", addr, &HandlerFuncs{
					Open:  func(*Conn) { close(opened) },
					Close: func(_ *Conn, err error) { failed <- err },
				})
				if err != nil {
					failed <- err
				}
				// Sent after the connect started (on io_uring, its SQE goes
				// to the kernel no later than this send's).
				c.Write([]byte("dialing"))
			case "hold":
				fd, msg := holdUntilConnected(ln, dialed, timeout)
				accepted <- fd // kept open: a close would end the dialed connection
				c.Write([]byte(msg))
			}
		}}, WithLoops(1), WithLoopConfig(Config{BlockThreshold: -1})) // the hold is meant
		t.Cleanup(func() { // before the server's shutdown, which waits for the dialed connection
			select {
			case fd := <-accepted:
				unix.Close(fd)
			default:
			}
		})
		c := dial(t, s)
		for _, step := range []struct{ send, want string }{{"dial", "dialing"}, {"hold", "held"}} {
			c.Write([]byte(step.send))
			if p, err := readFull(c, len(step.want)); err != nil || string(p) != step.want {
				t.Fatalf("%s: got %q, %v; want %q", step.send, p, err, step.want)
			}
		}
		select {
		case <-opened:
		case err := <-failed:
			t.Fatalf("a connect the kernel completed failed: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("the connect was never reported")
		}
	})
}

// A connect still in progress when its timeout is due fails with
// ErrDialTimeout: the SYN to a full accept queue is dropped, and its
// retransmission, 1 s later, comes after the timeout.
func TestDialTimesOutWhileConnecting(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		_, addr := backendtest.FullAcceptQueue(t)
		s := startServer(t, b, &HandlerFuncs{}, WithLoops(1))
		failed := make(chan error, 1)
		if err := s.Loops()[0].Post(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, err := s.Loops()[0].Dial(ctx, "tcp", addr, &HandlerFuncs{
				Open:  func(*Conn) { failed <- errors.New("opened") },
				Close: func(_ *Conn, err error) { failed <- err },
			})
			if err != nil {
				failed <- err
			}
		}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-failed:
			if !errors.Is(err, ErrDialTimeout) {
				t.Fatalf("dial ended with %v, want ErrDialTimeout", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the dial never ended")
		}
	})
}

// holdUntilConnected blocks the loop: it takes the connection that fills
// ln's accept queue, so that the dial's retransmitted SYN gets in, and
// waits in accept until the handshake is done and the dial's timeout is
// due. It returns the dial's accepted connection (or -1) and "held", or
// what went wrong.
func holdUntilConnected(ln int, dialed time.Time, timeout time.Duration) (int, string) {
	filler, _, err := unix.Accept(ln)
	if err != nil {
		return -1, fmt.Sprintf("accept the filler: %v", err)
	}
	unix.Close(filler)
	fd, _, err := unix.Accept(ln)
	if err != nil {
		return -1, fmt.Sprintf("accept the dial's connection: %v", err)
	}
	if d := time.Since(dialed); d < timeout {
		return fd, fmt.Sprintf("connected after %v, within the timeout", d)
	}
	return fd, "held"
}

// Loop.Dial takes its timeout from ctx: an ended ctx fails at once, on the
// loop and off it; off the loop it waits until the connect is done.
func TestLoopDialContext(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		s := startServer(t, b, &HandlerFuncs{}, WithLoops(1))
		l, addr := s.Loops()[0], s.Addr().String()
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel2()
		errs := make(chan error, 2)
		if err := l.Post(func() {
			_, err := l.Dial(cancelled, "tcp", addr, &HandlerFuncs{})
			errs <- err
			_, err = l.DialTLS(expired, "tcp", addr, testCert().ClientConfig("localhost"), &HandlerFuncs{})
			errs <- err
		}); err != nil {
			t.Fatal(err)
		}
		if err := await(t, errs, "on-loop dial"); !errors.Is(err, context.Canceled) {
			t.Fatalf("on the loop with a cancelled ctx: %v, want context.Canceled", err)
		}
		if err := await(t, errs, "on-loop dial"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("on the loop past the deadline: %v, want context.DeadlineExceeded", err)
		}
		if _, err := l.Dial(expired, "tcp", addr, &HandlerFuncs{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("off the loop past the deadline: %v, want context.DeadlineExceeded", err)
		}
		ctx, cancel3 := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel3()
		c, err := l.Dial(ctx, "tcp", addr, &HandlerFuncs{})
		if err != nil || c.RemoteAddr().String() != addr {
			t.Fatalf("off the loop: %v, %v; want a connection to %s", c, err, addr)
		}
		if err := l.Post(func() { c.Close() }); err != nil { // the shutdown waits for it
			t.Fatal(err)
		}
	})
}

// Dial from another goroutine while the loop is inside a callback waits
// for the loop: the dial is the loop's work, and it runs there. The
// check that chose between running it at once and posting it used to
// guess from the loop being in user code, so a goroutine that called
// during a callback ran the dial itself, beside the loop (the race
// detector saw it now and then on the portable backend). The same check
// serves DialTLS and PacketConn.Close.
func TestDialOffLoopWaitsForLoop(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		target := startServer(t, b, &HandlerFuncs{}, WithLoops(1))
		s := startServer(t, b, &HandlerFuncs{}, WithLoops(1), WithLoopConfig(Config{BlockThreshold: -1}))
		l := s.Loops()[0]
		entered, release := make(chan struct{}), make(chan struct{})
		if err := l.Post(func() { close(entered); <-release }); err != nil {
			t.Fatal(err)
		}
		<-entered
		done := make(chan error, 1)
		go func() {
			c, err := l.Dial(context.Background(), "tcp", target.Addr().String(), &HandlerFuncs{})
			if err == nil {
				c.Loop().Post(func() { c.Close() })
			}
			done <- err
		}()
		// The loop is held in the posted func: a dial run on the calling
		// goroutine returns within microseconds; one posted to the loop
		// cannot return before the release.
		select {
		case err := <-done:
			close(release)
			t.Fatalf("Dial returned (%v) while the loop was held in a callback: it ran off the loop", err)
		case <-time.After(200 * time.Millisecond):
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
