package net

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A connection its handler has paused once (a relay whose destination
// fell behind, such as the TCP proxy's under a slow reader) keeps at most
// one receive of input beyond a later pause, even after a run of short
// messages. On io_uring the short messages used to switch it back to a
// multishot recv, and a burst waiting in the socket then arrived in one
// run of the kernel's task work: everything past the first buffer went to
// the paused connection's heap input (up to the whole buffer ring, 4 MiB
// per connection with the proxy's ring).
func TestPausedConnKeepsOneReceive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		const (
			small = 100
			burst = 512 << 10
			// One receive: an io_uring buffer (16 KiB by default) or the
			// epoll backend's read buffer (64 KiB).
			bound = 64 << 10
		)
		const (
			phasePause = iota // consume, pause once; the test resumes
			phaseSmall        // consume and ack short messages
			phaseBurst        // pause at the first input, consume nothing
			phaseDrain        // consume everything, so the end is seen
		)
		var phase, smalls atomic.Int32
		conns := make(chan *Conn, 1)
		paused := make(chan struct{}, 1)
		blocked, release := make(chan struct{}), make(chan struct{})
		h := &HandlerFuncs{
			Open: func(c *Conn) {
				// Room in the socket for the whole burst, so it is all
				// there when the loop next reads.
				unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_RCVBUF, 2*burst)
				conns <- c
			},
			Data: func(c *Conn) {
				switch phase.Load() {
				case phasePause:
					c.Discard(-1)
					c.PauseRead()
					paused <- struct{}{}
				case phaseSmall:
					c.Discard(-1)
					c.Write([]byte{'k'})
					if smalls.Add(1) == 8 {
						// Keep the loop here while the burst fills the
						// socket: the next receive finds all of it.
						close(blocked)
						<-release
						phase.Store(phaseBurst)
					}
				case phaseBurst:
					c.PauseRead()
					paused <- struct{}{}
				default:
					c.Discard(-1)
				}
			},
		}
		s := startServer(t, b, h, WithLoops(1))
		cl := dial(t, s)
		c := await(t, conns, "no connection")
		var unblock sync.Once
		t.Cleanup(func() { // before the client's close: let the connection see it
			unblock.Do(func() { close(release) })
			phase.Store(phaseDrain)
			c.Loop().Post(c.ResumeRead)
		})
		post := func(f func()) {
			done := make(chan struct{})
			require.NoError(t, c.Loop().Post(func() { f(); close(done) }))
			await(t, done, "posted function did not run")
		}

		_, err := cl.Write(make([]byte, small))
		require.NoError(t, err)
		await(t, paused, "no first pause")
		phase.Store(phaseSmall)
		post(c.ResumeRead)
		ack := make([]byte, 1)
		for range 7 {
			_, err := cl.Write(make([]byte, small))
			require.NoError(t, err)
			_, err = cl.Read(ack)
			require.NoError(t, err)
		}
		_, err = cl.Write(make([]byte, small))
		require.NoError(t, err)
		await(t, blocked, "the eighth message did not arrive")
		go cl.Write(make([]byte, burst))
		require.Eventually(t, func() bool {
			n, err := unix.IoctlGetInt(c.Fd(), unix.SIOCINQ)
			return err == nil && n >= burst/2
		}, 10*time.Second, time.Millisecond, "the burst did not reach the server's socket")
		unblock.Do(func() { close(release) })
		await(t, paused, "no pause at the burst")
		// The posted function runs after the reports of the poll that
		// brought the burst: whatever that receive took is counted.
		var peak int64
		post(func() { peak = c.loop.Stats().PeakConnInput })
		require.LessOrEqual(t, peak, int64(bound),
			"a paused connection buffered %d KiB of input (one receive is at most %d KiB)", peak>>10, bound>>10)
	})
}
