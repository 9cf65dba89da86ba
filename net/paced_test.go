//go:build linux

// Linux only: reads queued input with SIOCINQ.

package net

import (
	"io"
	"net"
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
		post := func(f func()) { postWait(t, c.Loop(), f) }

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
		awaitInQueue(t, c, burst/2)
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

// A relay's source whose destination has fallen a receive buffer behind
// receives one buffer at a time from its next ForwardTo on, before the
// relay pauses it: the pause would come after a multishot run, and the
// rest of that run would wait in the source's heap input.
func TestForwardToBehindPacesSource(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		const (
			small = 100
			burst = 512 << 10
			bound = 64 << 10 // one receive, as in TestPausedConnKeepsOneReceive
		)
		const (
			phaseSmall  = iota // forward short messages, which the reader takes
			phaseBehind        // forward one more to a destination now behind
			phaseBurst         // pause at the first input, consume nothing
			phaseDrain         // consume everything, so the end is seen
		)
		var phase atomic.Int32
		conns := make(chan *Conn, 2)
		forwarded := make(chan struct{}, 8)
		paused := make(chan struct{}, 1)
		var dst *Conn // the first connection; set and read on the loop
		h := &HandlerFuncs{
			Open: func(c *Conn) {
				c.SetWriteWaterMarks(0, 0) // the relay's rule (ForwardTo's doc)
				if dst == nil {
					dst = c
				}
				unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_RCVBUF, 2*burst)
				conns <- c
			},
			Data: func(c *Conn) {
				switch phase.Load() {
				case phaseSmall, phaseBehind:
					c.ForwardTo(dst, -1)
					forwarded <- struct{}{}
				case phaseBurst:
					c.PauseRead()
					paused <- struct{}{}
				default:
					c.Discard(-1)
				}
			},
		}
		s := startServer(t, b, h, WithLoops(1))
		reader := dial(t, s)
		require.NoError(t, reader.(*net.TCPConn).SetReadBuffer(16<<10))
		to := await(t, conns, "no destination connection")
		writer := dial(t, s)
		src := await(t, conns, "no source connection")
		t.Cleanup(func() { // before the clients' close: let the source see it
			phase.Store(phaseDrain)
			src.Loop().Post(src.ResumeRead)
		})

		// Short messages, each read by the destination's reader: on
		// io_uring, four short receives in a row switch to multishot.
		got := make([]byte, small)
		for range 8 {
			_, err := writer.Write(make([]byte, small))
			require.NoError(t, err)
			await(t, forwarded, "a short message was not forwarded")
			_, err = io.ReadFull(reader, got)
			require.NoError(t, err)
		}
		// The reader stops; the destination falls behind.
		postWait(t, src.Loop(), func() { to.Write(make([]byte, 4<<20)) })
		require.Eventually(t, func() bool {
			var n int
			postWait(t, src.Loop(), func() { n = to.OutputBuffered() })
			return n >= bound
		}, 10*time.Second, time.Millisecond, "the destination did not fall behind")
		phase.Store(phaseBehind)
		_, err := writer.Write(make([]byte, small))
		require.NoError(t, err)
		await(t, forwarded, "the message after the reader stopped was not forwarded")

		// The burst waits in the socket before the loop reads again.
		phase.Store(phaseBurst)
		blocked, release := make(chan struct{}), make(chan struct{})
		var unblock sync.Once
		t.Cleanup(func() { unblock.Do(func() { close(release) }) })
		require.NoError(t, src.Loop().Post(func() { close(blocked); <-release }))
		await(t, blocked, "the loop did not run the posted function")
		go writer.Write(make([]byte, burst))
		awaitInQueue(t, src, burst/2)
		unblock.Do(func() { close(release) })
		await(t, paused, "no pause at the burst")
		var peak int64
		postWait(t, src.Loop(), func() { peak = src.loop.Stats().PeakConnInput })
		require.LessOrEqual(t, peak, int64(bound),
			"the relay's source buffered %d KiB of input (one receive is at most %d KiB)", peak>>10, bound>>10)
	})
}

// postWait runs f on l and waits for it.
func postWait(t *testing.T, l *Loop, f func()) {
	t.Helper()
	done := make(chan struct{})
	require.NoError(t, l.Post(func() { f(); close(done) }))
	await(t, done, "posted function did not run")
}

// awaitInQueue waits until c's socket holds at least n received bytes
// the loop has not read.
func awaitInQueue(t *testing.T, c *Conn, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		q, err := unix.IoctlGetInt(c.Fd(), unix.SIOCINQ)
		return err == nil && q >= n
	}, 10*time.Second, time.Millisecond, "the burst did not reach the server's socket")
}
