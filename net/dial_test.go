package net

import (
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
				_, err := c.Loop().Dial("tcp", addr, &HandlerFuncs{
					Open:  func(*Conn) { close(opened) },
					Close: func(_ *Conn, err error) { failed <- err },
				}, timeout)
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
			_, err := s.Loops()[0].Dial("tcp", addr, &HandlerFuncs{
				Open:  func(*Conn) { failed <- errors.New("opened") },
				Close: func(_ *Conn, err error) { failed <- err },
			}, 200*time.Millisecond)
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
