package net

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// massExpiryConns is how many idle connections expire together in the
// mass expiry tests: the test holds both ends, two descriptors each,
// inside the usual 20,000-descriptor limit, and stays quick under -race
// on a shared two-core machine.
const massExpiryConns = 3000

// idleConns dials n connections to s (one loop) and returns the clients
// and the server's ends, which the handler sends to opened.
func idleConns(t *testing.T, s *Server, opened <-chan *Conn, n int) ([]net.Conn, []*Conn) {
	t.Helper()
	clients := make([]net.Conn, n)
	for i := range clients {
		clients[i] = dial(t, s)
	}
	conns := make([]*Conn, n)
	for i := range conns {
		conns[i] = <-opened
	}
	return clients, conns
}

// expireAll arms, in one posted closure, a timer per connection that
// closes it after d, so the timers are all due in the same iteration.
func expireAll(t *testing.T, l *Loop, conns []*Conn, d time.Duration) {
	t.Helper()
	require.NoError(t, l.Post(func() {
		for _, c := range conns {
			c.AfterFunc(d, func() { c.Close() })
		}
	}))
}

// awaitEOF waits until every client has read the end of its connection.
func awaitEOF(t *testing.T, clients []net.Conn) {
	t.Helper()
	for i, c := range clients {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("client %d: read %v, want EOF", i, err)
		}
	}
}

// Thousands of connections whose timers are due at once (HTTP clients
// that connected together and said nothing reach the head timeout
// together) are closed over several iterations, at most a budget of
// timers each, so the loop goes back to other connections' I/O in
// between; every one of them still closes. Run in one iteration, the
// closes stalled the loop for the whole batch (on io_uring, 20,000 of
// them for over a second).
func TestMassExpirySpreadsTimers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		opened := make(chan *Conn, massExpiryConns)
		s := startServer(t, b, &HandlerFuncs{Open: func(c *Conn) { opened <- c }}, WithLoops(1))
		l := s.Loops()[0]
		clients, conns := idleConns(t, s, opened, massExpiryConns)
		expireAll(t, l, conns, 20*time.Millisecond)
		awaitEOF(t, clients)
		require.Eventually(t, func() bool { return s.NumConns() == 0 }, 10*time.Second, time.Millisecond)
		peak := make(chan int, 1)
		require.NoError(t, l.Post(func() { peak <- l.timerPeak }))
		if p, budget := <-peak, l.cfg.Budget; p > budget {
			t.Fatalf("%d timers ran in one loop iteration, want at most the budget, %d", p, budget)
		}
	})
}

// maxProbeIterations bounds the loop iterations between another
// connection's input reaching the kernel during a mass expiry and its
// dispatch: the closes' completions ahead of it take a budget's worth
// of them an iteration.
const maxProbeIterations = 8

// Input that arrives while thousands of connections are being closed is
// dispatched within a few loop iterations, not after the closes. On
// io_uring the kernel runs the closes' cancellations, and every
// receive, as deferred task work, first in first out, when the loop
// enters it; the loop used to let it run 40 items a call while its
// timers cancelled 64 operations an iteration, and a receive then
// waited behind the backlog (here about 1,100 cancellations, 30
// iterations and more). The probe is a connection the loop dialed to
// itself, so its send and the iteration counts are the loop's own; it
// sends from a timer armed after the expiring ones, which runs in the
// last batch, when the most closes are under way.
func TestMassExpiryLetsOthersThrough(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		opened := make(chan *Conn, massExpiryConns+1)
		arrived := make(chan uint64, 1)
		var l *Loop
		s := startServer(t, b, &HandlerFuncs{
			Open: func(c *Conn) { opened <- c },
			Data: func(c *Conn) {
				c.Discard(-1)
				select {
				case arrived <- l.ctr.iterations:
				default:
				}
			},
		}, WithLoops(1))
		l = s.Loops()[0]
		clients, conns := idleConns(t, s, opened, massExpiryConns)
		probe, err := l.Dial(context.Background(), "tcp", s.Addr().String(), &HandlerFuncs{})
		require.NoError(t, err)
		peer := <-opened // the probe's server end, which stays open
		t.Cleanup(func() {
			_ = l.Post(func() { probe.Close(); peer.Close() })
		})
		expireAll(t, l, conns, 20*time.Millisecond)
		sent := make(chan uint64, 1)
		require.NoError(t, l.Post(func() {
			l.AfterFunc(20*time.Millisecond, func() {
				sent <- l.ctr.iterations
				_, _ = probe.Write([]byte("x"))
			})
		}))
		from, to := <-sent, <-arrived
		awaitEOF(t, clients)
		t.Logf("dispatched %d iterations after the send", to-from)
		if b == BackendPortable {
			// Its reader goroutines hand input to the loop on the Go
			// scheduler's time, not within a number of iterations.
			return
		}
		if waited := to - from; waited > maxProbeIterations {
			t.Fatalf("the probe's input was dispatched %d loop iterations after it was sent, want at most %d", waited, maxProbeIterations)
		}
	})
}

// maxClosesPerRoundTrip bounds the connections closed between a probe's
// request and the arrival of its answer, both on the loop, during a mass
// expiry: the request and the answer each wait for at most one poll's
// closes (closesPerIteration), and a third poll may fall between them.
const maxClosesPerRoundTrip = 3 * closesPerIteration

// A request that arrives while thousands of connections expire is
// answered after a bounded number of those closes, however many are
// due. A close costs the loop 10-25 µs (close(2) sends the FIN, and on
// loopback the peer's side of it runs in the same call), and they used
// to run among the timers (epoll) or the completions (io_uring), a
// budget of 64 of them between a request's dispatch and the flush of
// its answer, and another budget before the next input was read. The
// probe is a connection the loop dialed to itself; it sends from a timer
// armed among the expiring ones, so the request goes out amid the
// closes, and counts them (Stats.Closed) from its send to its answer.
func TestMassExpiryAnswersBetweenCloses(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		opened := make(chan *Conn, massExpiryConns+1)
		s := startServer(t, b, &HandlerFuncs{
			Open: func(c *Conn) { opened <- c },
			Data: func(c *Conn) { // only the probe's server end sends
				c.Discard(-1)
				_, _ = c.Write([]byte("y"))
			},
		}, WithLoops(1))
		l := s.Loops()[0]
		clients, conns := idleConns(t, s, opened, massExpiryConns)
		answered := make(chan uint64, 1)
		probe, err := l.Dial(context.Background(), "tcp", s.Addr().String(), &HandlerFuncs{
			Data: func(c *Conn) {
				c.Discard(-1)
				answered <- l.Stats().Closed
			},
		})
		require.NoError(t, err)
		peer := <-opened
		t.Cleanup(func() {
			_ = l.Post(func() { probe.Close(); peer.Close() })
		})
		const d = 20 * time.Millisecond
		sent := make(chan uint64, 1)
		half := len(conns) / 2
		expireAll(t, l, conns[:half], d)
		require.NoError(t, l.Post(func() {
			l.AfterFunc(d, func() {
				sent <- l.Stats().Closed
				_, _ = probe.Write([]byte("x"))
			})
		}))
		expireAll(t, l, conns[half:], d)
		from, to := <-sent, <-answered
		awaitEOF(t, clients)
		require.Eventually(t, func() bool { return s.NumConns() == 2 }, 10*time.Second, time.Millisecond)
		t.Logf("%d connections closed between the probe's request and its answer", to-from)
		if b == BackendPortable {
			// Its reader goroutines hand input to the loop on the Go
			// scheduler's time, not between a number of closes.
			return
		}
		if closed := to - from; closed > maxClosesPerRoundTrip {
			t.Fatalf("%d connections closed between the probe's request and its answer, want at most %d", closed, maxClosesPerRoundTrip)
		}
	})
}

// A timer callback that closes connections one after another sees
// ShouldYield turn true after the iteration's share of closes, and a
// later iteration starts with it false again: the signal that a batch of
// deadlines served by one timer (package http's) uses to stop and leave
// the rest to the next iteration.
func TestShouldYieldAfterAnIterationsCloses(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		const n = 2 * closesPerIteration
		opened := make(chan *Conn, n)
		s := startServer(t, b, &HandlerFuncs{Open: func(c *Conn) { opened <- c }}, WithLoops(1))
		l := s.Loops()[0]
		clients, conns := idleConns(t, s, opened, n)
		type batch struct {
			yieldedAtStart bool
			closed         int
		}
		done := make(chan batch, 2)
		closeUntilYield := func() {
			var got batch
			got.yieldedAtStart = l.ShouldYield()
			for _, c := range conns {
				if l.ShouldYield() {
					break
				}
				if !c.Closed() {
					c.Close()
					got.closed++
				}
			}
			done <- got
		}
		require.NoError(t, l.Post(func() {
			l.AfterFunc(0, func() {
				closeUntilYield()
				l.AfterFunc(0, closeUntilYield)
			})
		}))
		for i := 0; i < 2; i++ {
			got := <-done
			require.False(t, got.yieldedAtStart, "batch %d: ShouldYield true before any close of the iteration", i)
			require.Equal(t, closesPerIteration, got.closed, "batch %d: closes before ShouldYield", i)
		}
		awaitEOF(t, clients)
	})
}
