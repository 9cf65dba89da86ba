//go:build unix

package net_test

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// A handler that takes only part of its input, pauses, and resumes later
// (a proxy waiting for room) must not see its held input grow: resuming
// presents the held input before the kernel is read again. Otherwise an
// io_uring multishot recv pulls in a new batch on every cycle, and the
// connection dies with ErrInputTooLarge.
func TestPauseResumeCyclesKeepInputBounded(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		const total = 16 << 20
		var consumed atomic.Int64
		closed := make(chan error, 1)
		h := &vnet.HandlerFuncs{
			Data: func(c *vnet.Conn) {
				in, _ := c.Next(min(c.Buffered(), 8<<10))
				if consumed.Add(int64(len(in))) == total {
					c.Write([]byte("done"))
				}
				if c.Buffered() > 0 {
					c.PauseRead()
					c.Loop().Defer(c.ResumeRead)
				}
			},
			Close: func(c *vnet.Conn, err error) { closed <- err },
		}
		s, err := vnet.Listen("tcp", "127.0.0.1:0", h, vnet.WithBackend(b), vnet.WithLoops(1),
			vnet.WithReadBufferCap(1<<20), vnet.WithLogger(quietLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { shutdown(t, s) })
		c := dialTCP(t, s.Addr().String())
		go c.Write(make([]byte, total))
		got := make([]byte, 4)
		if _, err := io.ReadFull(c, got); err != nil {
			select {
			case cerr := <-closed:
				t.Fatalf("server closed the connection: %v (after consuming %d of %d bytes)", cerr, consumed.Load(), total)
			case <-time.After(time.Second):
			}
			t.Fatalf("read: %v (server consumed %d of %d bytes)", err, consumed.Load(), total)
		}
		c.Close()
		var _ net.Conn = c
	})
}
