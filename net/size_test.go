//go:build linux

// Linux only: tests the io_uring and epoll backends' internals.

package net

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestIdleFootprint guards what every idle connection costs the heap: the
// Conn (a 288-byte size class) and the backends' per-slot records. A field
// added to one of them should either fit or move rare state into connAux.
func TestIdleFootprint(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(Conn{}), uintptr(256), "Conn")
	require.LessOrEqual(t, unsafe.Sizeof(uconn{}), uintptr(40), "uconn")
	require.LessOrEqual(t, unsafe.Sizeof(econn{}), uintptr(32), "econn")
}

// TestIdleOutputQueueEmpty: a connection whose output was all sent gives
// its output queue's segment list back to the loop, so an idle
// keep-alive connection holds none (it kept a 48-byte one before), and
// the next write takes one again.
func TestIdleOutputQueueEmpty(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		var srv atomic.Pointer[Conn]
		h := &HandlerFuncs{Data: func(c *Conn) {
			srv.Store(c)
			in, _ := c.Next(-1)
			c.Write(in)
		}}
		s := startServer(t, b, h, WithLoops(1))
		conn := dial(t, s)
		// held reports the capacity of the server connection's segment
		// list, read on its loop.
		held := func() (n int) {
			c := srv.Load()
			done := make(chan struct{})
			require.NoError(t, c.Loop().Post(func() {
				n = cap(c.out.segs)
				close(done)
			}))
			<-done
			return n
		}
		for i := range 3 {
			_, err := conn.Write([]byte("ping"))
			require.NoError(t, err)
			buf := make([]byte, 4)
			_, err = io.ReadFull(conn, buf)
			require.NoError(t, err)
			require.Equal(t, "ping", string(buf), "round %d", i)
			require.Eventually(t, func() bool { return held() == 0 },
				5*time.Second, time.Millisecond, "round %d: the list went back to the loop", i)
		}
	})
}

// TestUringDialAddressReleased: the address an io_uring connect reads is
// kept in the backend's dialing map, not in every slot's record, until
// the connect's completion; then it goes, whether the connect succeeded,
// was refused or was aborted, so the map holds nothing once no
// connection is dialing.
func TestUringDialAddressReleased(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		if b != BackendUring {
			t.Skip("the io_uring backend's record")
		}
		s := startServer(t, b, echoHandler(), WithLoops(1))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		refused := ln.Addr().String()
		ln.Close()
		l := s.Loops()[0]
		dialing := func() (n int) {
			done := make(chan struct{})
			require.NoError(t, l.Post(func() {
				n = len(l.be.(*uringBackend).dialing)
				close(done)
			}))
			<-done
			return n
		}
		var open []*Conn
		for i := range 30 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			switch i % 3 {
			case 0:
				c, err := s.Dial(ctx, "tcp", s.Addr().String(), &HandlerFuncs{})
				require.NoError(t, err)
				open = append(open, c)
			case 1:
				_, err := s.Dial(ctx, "tcp", refused, &HandlerFuncs{})
				require.Error(t, err)
			case 2:
				// Aborted while the connect is in flight.
				require.NoError(t, l.Post(func() {
					c, err := l.Dial(context.Background(), "tcp", s.Addr().String(), &HandlerFuncs{})
					if err == nil {
						c.Abort(nil)
					}
				}))
			}
			cancel()
		}
		require.Eventually(t, func() bool { return dialing() == 0 }, 10*time.Second, time.Millisecond,
			"connect addresses left in the dialing map")
		for _, c := range open {
			require.True(t, c.RemoteAddrPort().IsValid())
			require.NoError(t, l.Post(func() { c.Close() })) // both ends close, so Shutdown has none to wait for
		}
	})
}

// TestUringRingGrowsOnDemand: the io_uring receive ring starts with
// initialRecvBuffers of its buffers and gets more only when receives
// find it empty. A buffer costs memory from the first byte the kernel
// writes into it and the ring hands its buffers out in turn, so a ring
// given all of them at once had every one touched by a trickle of small
// requests (veloq-proxy: 128 × 64 KiB, a page each, 512 KB). When more
// clients send at once than the ring holds, every byte still arrives.
func TestUringRingGrowsOnDemand(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		if b != BackendUring {
			t.Skip("the io_uring backend's ring")
		}
		// Whole buffers: the shared ones fit these messages in one.
		s := startServer(t, b, echoHandler(), WithLoops(1),
			WithLoopConfig(Config{RecvBuffers: 64, RecvBufferSize: 4096, BlockThreshold: -1}), // the hold below is meant
			withWholeRecvBuffers())
		l := s.Loops()[0]
		out := func() (n int) {
			done := make(chan struct{})
			require.NoError(t, l.Post(func() {
				n = l.be.(*uringBackend).whole.out
				close(done)
			}))
			<-done
			return n
		}
		require.Equal(t, initialRecvBuffers, out(), "given to the ring at start")

		const clients = 48 // more than the ring starts with, fewer than the arena
		conns := make([]net.Conn, clients)
		for i := range conns {
			conns[i] = dial(t, s)
		}
		// Every client's message waits in its socket while the loop is
		// held, so the receives complete in one batch when it is let go.
		release := make(chan struct{})
		require.NoError(t, l.Post(func() { <-release }))
		for i, c := range conns {
			_, err := c.Write([]byte(fmt.Sprintf("message %02d", i)))
			require.NoError(t, err)
		}
		close(release)
		for i, c := range conns {
			require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
			buf := make([]byte, len("message 00"))
			_, err := io.ReadFull(c, buf)
			require.NoError(t, err, "client %d", i)
			require.Equal(t, fmt.Sprintf("message %02d", i), string(buf))
		}
		n := out()
		require.Greater(t, n, initialRecvBuffers, "the ring grew when it ran dry")
		require.LessOrEqual(t, n, 64)
	})
}

// TestUringRingSmallReceivesShareBuffers: small receives share the
// buffers of the second io_uring ring (IOU_PBUF_RING_INC), so bursts of
// small messages from many clients, and a stream of them after, leave a
// few pages of the receive arenas resident. With whole buffers only, each
// receive took one, the ring grew to what a burst took at once and handed
// its buffers out in turn, keeping a page of each resident: 256 KB of
// veloq-proxy's RSS after its idle benchmark's connect bursts.
func TestUringRingSmallReceivesShareBuffers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		if b != BackendUring {
			t.Skip("the io_uring backend's rings")
		}
		const size = 16 << 10
		s := startServer(t, b, echoHandler(), WithLoops(1),
			WithLoopConfig(Config{RecvBuffers: 64, RecvBufferSize: size, BlockThreshold: -1})) // the hold below is meant
		l := s.Loops()[0]
		ub := l.be.(*uringBackend)
		if ub.small == nil {
			t.Skip("the kernel consumes receive buffers whole (IOU_PBUF_RING_INC is Linux 6.12+)")
		}
		const clients = 48
		conns := make([]net.Conn, clients)
		for i := range conns {
			conns[i] = dial(t, s)
		}
		// Every client's message waits in its socket while the loop is
		// held, so the receives complete in one batch when it is let go.
		buf := make([]byte, len("message 00"))
		for range 4 {
			release := make(chan struct{})
			require.NoError(t, l.Post(func() { <-release }))
			for i, c := range conns {
				_, err := c.Write([]byte(fmt.Sprintf("message %02d", i)))
				require.NoError(t, err)
			}
			close(release)
			for i, c := range conns {
				require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
				_, err := io.ReadFull(c, buf)
				require.NoError(t, err, "client %d", i)
				require.Equal(t, fmt.Sprintf("message %02d", i), string(buf))
			}
		}
		require.LessOrEqual(t, recvArenaPages(t, ub), 1, "pages after the bursts")

		// A stream of small messages, 16 buffers' worth, in turn.
		msg := make([]byte, 200)
		for i := range 16 * size / len(msg) {
			for j := range msg {
				msg[j] = byte(i + j)
			}
			echoBack(t, conns[i%clients], msg)
		}
		require.LessOrEqual(t, recvArenaPages(t, ub), smallRingStep*size/unix.Getpagesize(), "pages after the stream")
	})
}

// TestUringLargeReceivesTakeWholeBuffers: a connection whose receives
// grow to smallRecv's threshold moves to whole buffers, where a large
// message is not split where a shared buffer ends, and a run of small
// receives moves it back.
func TestUringLargeReceivesTakeWholeBuffers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		if b != BackendUring {
			t.Skip("the io_uring backend's rings")
		}
		s := startServer(t, b, echoHandler(), WithLoops(1))
		l := s.Loops()[0]
		if l.be.(*uringBackend).small == nil {
			t.Skip("the kernel consumes receive buffers whole (IOU_PBUF_RING_INC is Linux 6.12+)")
		}
		c := dial(t, s)
		whole := func() bool {
			got := make(chan bool, 1)
			require.NoError(t, l.Post(func() {
				for slot := range l.be.(*uringBackend).conns.len() {
					if u := l.be.(*uringBackend).conns.at(uint32(slot)); u.fd >= 0 {
						got <- u.whole
						return
					}
				}
				close(got)
			}))
			w, ok := <-got
			require.True(t, ok, "no connection")
			return w
		}
		echoBack(t, c, []byte("hello"))
		require.False(t, whole(), "after a small message")
		big := make([]byte, 256<<10)
		for i := range big {
			big[i] = byte(i * 7)
		}
		echoBack(t, c, big)
		require.True(t, whole(), "after a large message")
		for range shortsToMultishot {
			echoBack(t, c, []byte("hello"))
		}
		require.False(t, whole(), "after small messages again")
		echoBack(t, c, big) // served from the shared ring's remains and whole buffers alike
	})
}

// echoBack writes msg on c and reads it back.
func echoBack(t *testing.T, c net.Conn, msg []byte) {
	t.Helper()
	wrote := make(chan error, 1)
	go func() { // a large msg fills the sockets' buffers before its echo is read
		_, err := c.Write(msg)
		wrote <- err
	}()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	require.NoError(t, err)
	require.Equal(t, msg, buf)
	require.NoError(t, <-wrote)
}

// recvArenaPages counts the pages of ub's receive arenas in memory.
func recvArenaPages(t *testing.T, ub *uringBackend) (n int) {
	page := unix.Getpagesize()
	for _, rr := range []*recvRing{ub.whole, ub.small} {
		if rr == nil {
			continue
		}
		for i := range rr.arena.Count() {
			b := rr.arena.Buf(i)
			n += mincore(t, b[:len(b)/page*page], page)
		}
	}
	return n
}

// withWholeRecvBuffers makes io_uring receives take whole buffers only,
// as on kernels without IOU_PBUF_RING_INC.
func withWholeRecvBuffers() Option { return func(o *options) { o.cfg.noIncRing = true } }

// mincore counts the pages of b (page-aligned, whole pages) in memory:
// bit 0 of each byte mincore(2) answers.
func mincore(t *testing.T, b []byte, page int) (n int) {
	vec := make([]byte, len(b)/page)
	// unsafe: mincore reads the page table for [b, b+len(b)) and writes
	// one byte per page into vec, which has that many.
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	require.Zero(t, errno, "mincore")
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestSmallWriteSegment: a small write copied into the output queue
// takes a 2 KiB segment, not 4 KiB: every connection with output pending
// holds one, and the loop's cache keeps up to 64 of a size after a burst
// (veloq-proxy's upstream requests queued while their connections were
// made left 256 KiB of 4 KiB segments). AvailableBuffer still lends a
// 4 KiB spare, room for an answer built in place and a pipelined batch
// queued after it in one segment.
func TestSmallWriteSegment(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		type caps struct{ seg, spare int }
		got := make(chan caps, 1)
		s := startServer(t, b, &HandlerFuncs{Open: func(c *Conn) {
			var r caps
			r.spare = cap(c.AvailableBuffer())
			c.Write(make([]byte, 100)) // a copy: not built in the spare
			if q := &c.out; len(q.segs) > q.head {
				r.seg = cap(q.segs[len(q.segs)-1].b)
			}
			got <- r
		}}, WithLoops(1))
		conn := dial(t, s)
		r := await(t, got, "no connection")
		require.Equal(t, 2<<10, r.seg, "segment of a 100-byte write")
		require.GreaterOrEqual(t, r.spare, 4<<10, "AvailableBuffer's spare")
		buf := make([]byte, 100)
		_, err := io.ReadFull(conn, buf)
		require.NoError(t, err)
	})
}
