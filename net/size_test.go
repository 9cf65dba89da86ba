//go:build linux

// Linux only: tests the io_uring and epoll backends' internals.

package net

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
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
