package http

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// Thousands of clients that connected together and said nothing reach
// the head timeout together. The server's connections share one loop
// timer (connTimers), and that timer must hand the loop back between
// small batches of expiries as the loop's own timers do: run in one
// callback, the 1,500 expiries below were all closed before another
// client's request was read. The loop is held while the deadlines pass,
// so they are all due when it runs again. The probe is a keep-alive
// client the loop dialed to the server (its first answer takes it out of
// the head timeout's reach); it sends from a timer due after the
// expiring deadlines. The test counts the connections closed
// (Stats.Closed) from the loop's return to the probe's answer, both read
// on the loop: at most a few batches, not all of them.
func TestMassHeadTimeoutLetsOthersThrough(t *testing.T) {
	const n, timeout = 1500, time.Second
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(func(w *ResponseWriter, r *Request) { w.WriteString("ok") }),
			WithNetOptions(vnet.WithLoops(1)), WithReadHeaderTimeout(timeout), WithNextRequestTimeout(time.Minute))
		l := s.NetServer().Loops()[0]
		answered := make(chan uint64, 2)
		var got []byte
		probe, err := l.Dial(context.Background(), "tcp", s.Addr().String(), &vnet.HandlerFuncs{
			Data: func(c *vnet.Conn) {
				in, _ := c.Next(-1)
				got = append(got, in...)
				if bytes.HasSuffix(got, []byte("\r\n\r\nok")) {
					got = got[:0]
					answered <- l.Stats().Closed
				}
			},
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Post(func() { probe.Close() }) })
		get := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, l.Post(func() { _, _ = probe.Write(get) }))
		<-answered
		base, accepted := s.NetServer().NumConns(), l.Stats().Accepted

		clients := make([]net.Conn, n)
		for i := range clients {
			c, err := net.Dial("tcp", s.Addr().String())
			require.NoError(t, err)
			clients[i] = c
			t.Cleanup(func() { c.Close() })
		}
		// Accepted, not open: where dialing takes longer than the timeout
		// (under Wine it can), the first have expired already.
		require.Eventually(t, func() bool { return l.Stats().Accepted == accepted+n }, 30*time.Second, time.Millisecond)
		due := time.Now().Add(timeout) // every idle client's deadline is before this

		held := make(chan uint64, 1)
		require.NoError(t, l.Post(func() {
			l.AfterFunc(time.Until(due)+5*time.Millisecond, func() { _, _ = probe.Write(get) })
			// Hold the loop until the deadlines and the probe's timer are
			// all due, so that one iteration finds them due together.
			time.Sleep(time.Until(due) + 15*time.Millisecond)
			held <- l.Stats().Closed
		}))
		from, to := <-held, <-answered
		t.Logf("%d connections closed from the loop's return to the probe's answer", to-from)
		require.Eventually(t, func() bool { return s.NetServer().NumConns() == base }, 30*time.Second, time.Millisecond)
		if b == vnet.BackendPortable {
			return // its readers hand input over on the Go scheduler's time
		}
		require.LessOrEqual(t, to-from, uint64(maxClosesBeforeProbe), "the expiries ran in one batch ahead of the probe's request")
	})
}

// maxClosesBeforeProbe bounds the closes from the loop's return to the
// probe's answer: the probe's timer runs after the first batch of
// expiries, and its request and answer each wait for at most a poll's
// batch or two (net's closesPerIteration, 16).
const maxClosesBeforeProbe = 6 * 16
