package net

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// massExpiryConns is how many idle connections expire together in
// TestMassExpirySpreadsTimers: the test holds both ends, two descriptors
// each, inside the usual 20,000-descriptor limit, and stays quick under
// -race on a shared two-core machine.
const massExpiryConns = 3000

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
		clients := make([]net.Conn, massExpiryConns)
		for i := range clients {
			clients[i] = dial(t, s)
		}
		conns := make([]*Conn, massExpiryConns)
		for i := range conns {
			conns[i] = <-opened
		}
		// One posted closure arms every timer, so they are all due in the
		// same iteration.
		require.NoError(t, l.Post(func() {
			for _, c := range conns {
				c.AfterFunc(20*time.Millisecond, func() { c.Close() })
			}
		}))
		for i, c := range clients {
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
				t.Fatalf("client %d: read %v, want EOF", i, err)
			}
		}
		require.Eventually(t, func() bool { return s.NumConns() == 0 }, 10*time.Second, time.Millisecond)
		peak := make(chan int, 1)
		require.NoError(t, l.Post(func() { peak <- l.timerPeak }))
		if p, budget := <-peak, l.cfg.Budget; p > budget {
			t.Fatalf("%d timers ran in one loop iteration, want at most the budget, %d", p, budget)
		}
	})
}
