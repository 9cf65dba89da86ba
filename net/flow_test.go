//go:build unix

package net_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// pattern fills p with the bytes of stream id starting at offset off, so a
// reader can check both content and order.
func pattern(p []byte, id, off int) {
	for i := range p {
		k := off + i
		p[i] = byte(k*7 + k>>9 + id)
	}
}

// TestSlowReadersBoundOutput: 16 clients each send 8 MiB to an echo
// server and read nothing until the server has stopped reading from all of
// them. The pending output of every connection stays near the write
// high-water mark (the pause happens in the write that crosses it, not at
// the end of a batch), and once the clients read, every byte comes back in
// order.
func TestSlowReadersBoundOutput(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		const (
			clients = 16
			size    = 8 << 20
			high    = 64 << 10
		)
		echo := &vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
			p, _ := c.Next(-1)
			c.Write(p)
		}}
		s, err := vnet.Listen("tcp", "127.0.0.1:0", echo, vnet.WithBackend(b), vnet.WithLoops(1),
			vnet.WithLogger(quietLogger(t)), vnet.WithWriteWaterMarks(high/2, high))
		require.NoError(t, err)
		t.Cleanup(func() { shutdown(t, s) })

		conns := make([]*net.TCPConn, clients)
		var wrote sync.WaitGroup
		werrs := make(chan error, clients)
		for i := range conns {
			c, err := net.Dial("tcp", s.Addr().String())
			require.NoError(t, err)
			tc := c.(*net.TCPConn)
			require.NoError(t, tc.SetReadBuffer(64<<10))
			conns[i] = tc
			t.Cleanup(func() { tc.Close() })
			wrote.Add(1)
			go func(id int) {
				defer wrote.Done()
				tc.SetWriteDeadline(time.Now().Add(60 * time.Second))
				buf := make([]byte, 64<<10)
				for off := 0; off < size; off += len(buf) {
					pattern(buf, id, off)
					if _, err := tc.Write(buf); err != nil {
						werrs <- err
						return
					}
				}
			}(i)
		}
		// The server stops reading each peer once its echo backs up; the
		// clients' writes then stall on TCP flow control. Wait until the
		// input the server took stops growing.
		var last uint64
		stable := 0
		require.Eventually(t, func() bool {
			in := s.Stats()[0].BytesIn
			if in == last && in > 0 {
				stable++
			} else {
				stable = 0
			}
			last = in
			return stable >= 5
		}, 30*time.Second, 50*time.Millisecond, "server input never settled")
		peak := s.Stats()[0].PeakConnOutput
		t.Logf("%s: server took %d KiB before pausing; peak pending output of a connection %d KiB, peak held input %d KiB",
			b, last>>10, peak>>10, s.Stats()[0].PeakConnInput>>10)
		// Above the mark by at most the echo of one read (epoll reads 64
		// KiB at a time, io_uring 16 KiB buffers).
		require.LessOrEqual(t, peak, int64(high+64<<10), "pending output per connection must stay near the high-water mark")
		// Input received after the pause: at most one read (epoll) or one
		// receive buffer (io_uring) per connection.
		require.LessOrEqual(t, s.Stats()[0].PeakConnInput, int64(64<<10), "input held by a paused connection")

		var read sync.WaitGroup
		rerrs := make(chan error, clients)
		for i, tc := range conns {
			read.Add(1)
			go func(id int) {
				defer read.Done()
				tc.SetReadDeadline(time.Now().Add(60 * time.Second))
				got := make([]byte, 64<<10)
				want := make([]byte, 64<<10)
				for off := 0; off < size; off += len(got) {
					if _, err := io.ReadFull(tc, got); err != nil {
						rerrs <- err
						return
					}
					pattern(want, id, off)
					if string(got) != string(want) {
						rerrs <- errors.New("echo out of order or corrupted")
						return
					}
				}
			}(i)
		}
		wrote.Wait()
		read.Wait()
		close(werrs)
		close(rerrs)
		for err := range werrs {
			require.NoError(t, err)
		}
		for err := range rerrs {
			require.NoError(t, err)
		}
		require.LessOrEqual(t, s.Stats()[0].PeakConnOutput, int64(high+64<<10))
		// The output buffers freed by 16 drained connections stay within
		// the loop's cache budget; the rest went back to the shared pool.
		for _, c := range conns {
			c.Close()
		}
		require.Eventually(t, func() bool { return s.Stats()[0].Conns == 0 }, 10*time.Second, 10*time.Millisecond)
		require.LessOrEqual(t, s.Stats()[0].CachedBytes, int64(4<<20))
	})
}

// TestWaterMarksPerConn: a connection with its marks turned off keeps
// reading whatever its output, and one with a lower mark pauses earlier.
func TestWaterMarksPerConn(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		const size = 4 << 20
		var peak sync.Map
		h := &vnet.HandlerFuncs{
			Open: func(c *vnet.Conn) {
				c.SetWriteWaterMarks(0, 0)
				// A small socket buffer, so the echo waits in the loop's
				// output rather than in the kernel.
				require.NoError(t, unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 32<<10))
			},
			Data: func(c *vnet.Conn) {
				p, _ := c.Next(-1)
				c.Write(p)
				if v, _ := peak.Load("p"); v == nil || v.(int) < c.OutputBuffered() {
					peak.Store("p", c.OutputBuffered())
				}
			},
		}
		s, err := vnet.Listen("tcp", "127.0.0.1:0", h, vnet.WithBackend(b), vnet.WithLoops(1),
			vnet.WithLogger(quietLogger(t)), vnet.WithWriteWaterMarks(8<<10, 16<<10))
		require.NoError(t, err)
		t.Cleanup(func() { shutdown(t, s) })
		c, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		c.(*net.TCPConn).SetReadBuffer(64 << 10)
		go func() {
			buf := make([]byte, 64<<10)
			c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			for off := 0; off < size; off += len(buf) {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
		// With the marks off the server reads everything the client sends
		// even though nobody reads the echo: its output grows past the
		// configured 16 KiB mark.
		require.Eventually(t, func() bool { return s.Stats()[0].BytesIn == size }, 30*time.Second, 10*time.Millisecond)
		v, _ := peak.Load("p")
		require.Greater(t, v.(int), 1<<20, "marks off: output is the handler's to bound")
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := io.CopyN(io.Discard, c, size)
		require.NoError(t, err)
		require.Equal(t, int64(size), n)
	})
}

// TestBackloggedStopsAnswers: a handler that answers each one-byte request
// with 32 KiB stops answering the requests already buffered once
// Backlogged reports true, and OnData brings the rest back when the
// output has drained, so the connection's output stays within the
// high-water mark plus one answer while the client reads nothing, and
// every answer still arrives, in order.
func TestBackloggedStopsAnswers(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		const (
			n    = 200
			size = 32 << 10
			high = 64 << 10
		)
		var stopped int
		answer := func(c *vnet.Conn) {
			for c.Buffered() > 0 {
				if c.Backlogged() {
					stopped++
					return
				}
				p, _ := c.Next(1)
				out := c.AvailableBuffer()[:0]
				for range size {
					out = append(out, p[0])
				}
				c.Write(out)
			}
		}
		s, err := vnet.Listen("tcp", "127.0.0.1:0", &vnet.HandlerFuncs{Data: answer}, vnet.WithBackend(b),
			vnet.WithLoops(1), vnet.WithLogger(quietLogger(t)), vnet.WithWriteWaterMarks(high/2, high))
		require.NoError(t, err)
		t.Cleanup(func() { shutdown(t, s) })

		c, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		reqs := make([]byte, n)
		for i := range reqs {
			reqs[i] = byte(i)
		}
		_, err = c.Write(reqs)
		require.NoError(t, err)
		got := make([]byte, size)
		for i := range n {
			_, err := io.ReadFull(c, got)
			require.NoError(t, err)
			require.Equal(t, byte(i), got[0], "answer %d out of order", i)
			require.Equal(t, byte(i), got[size-1])
		}
		st := s.Stats()[0]
		t.Logf("%s: peak pending output %d KiB", b, st.PeakConnOutput>>10)
		require.LessOrEqual(t, st.PeakConnOutput, int64(high+size))
		done := make(chan int, 1)
		require.NoError(t, s.Loops()[0].Post(func() { done <- stopped }))
		require.Positive(t, <-done, "Backlogged never stopped the handler")
	})
}
