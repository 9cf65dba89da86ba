package net

import (
	"bytes"
	"io"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAvailableBuffer frames every input chunk as "[chunk]" built in the
// space AvailableBuffer returns, on both backends. A frame that fits must
// be queued where it was built (no copy); one that outgrew the space is
// copied. Either way the client reads every frame intact and in order.
func TestAvailableBuffer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		var inPlace, copied, small, bad atomic.Int64
		h := &HandlerFuncs{Data: func(c *Conn) {
			in, _ := c.Next(-1)
			buf := c.AvailableBuffer()
			free := cap(buf)
			if free < minAvail || len(buf) != 0 {
				small.Add(1)
			}
			buf = append(buf, '[')
			buf = append(buf, in...)
			buf = append(buf, ']')
			if _, err := c.Write(buf); err != nil {
				bad.Add(1)
				return
			}
			tail := c.out.segs[len(c.out.segs)-1].b
			switch here := &tail[len(tail)-1] == &buf[len(buf)-1]; {
			case len(buf) <= free && here:
				inPlace.Add(1)
			case len(buf) > free && !here:
				copied.Add(1)
			default:
				bad.Add(1) // fitted but copied, or outgrew yet not copied
			}
		}}
		s := startServer(t, b, h, WithLoops(1))
		conn := dial(t, s)

		var want bytes.Buffer
		for i, size := range []int{1, 100, 511, 600, 3000, 5000, 70000, 20, 4096} {
			msg := bytes.Repeat([]byte{byte('a' + i)}, size)
			want.Write(msg)
			_, err := conn.Write(msg)
			require.NoError(t, err)
			// One message at a time keeps most chunks whole; the reader
			// below does not depend on it.
			got := readFrames(t, conn, size)
			require.Equal(t, msg, got, "message %d (%d bytes)", i, size)
		}
		require.Zero(t, bad.Load(), "writes that went the wrong way")
		require.Zero(t, small.Load(), "AvailableBuffer under %d bytes or not empty", minAvail)
		require.Positive(t, inPlace.Load())
		require.Positive(t, copied.Load(), "the 70000-byte chunks outgrow the space")
	})
}

// readFrames reads "[...]" frames until n payload bytes arrived and
// returns the payload.
func readFrames(t *testing.T, r io.Reader, n int) []byte {
	t.Helper()
	var payload []byte
	open := false
	buf := make([]byte, 64<<10)
	for len(payload) < n || open {
		k, err := r.Read(buf) // dial's deadline bounds the wait
		require.NoError(t, err)
		for _, c := range buf[:k] {
			switch c {
			case '[':
				require.False(t, open, "frame opened twice")
				open = true
			case ']':
				require.True(t, open, "frame closed twice")
				open = false
			default:
				require.True(t, open, "byte outside a frame")
				payload = append(payload, c)
			}
		}
	}
	return payload
}

// TestAvailableBufferClosed: nothing to lend once the connection closed.
func TestAvailableBufferClosed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		got := make(chan []byte, 1)
		h := &HandlerFuncs{Data: func(c *Conn) {
			c.Close()
			got <- c.AvailableBuffer()
		}}
		s := startServer(t, b, h, WithLoops(1))
		conn := dial(t, s)
		_, err := conn.Write([]byte("x"))
		require.NoError(t, err)
		require.Nil(t, await(t, got, "no OnData"))
	})
}

// TestWritevOneSegment: a message written with Writev lands in one output
// segment when one can hold it, even behind a nearly full tail, so it
// leaves in one send; the peer reads every byte in order.
func TestWritevOneSegment(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		var split atomic.Int64
		h := &HandlerFuncs{Data: func(c *Conn) {
			c.Next(-1)
			// Fill the tail to 100 bytes short of a segment, then write a
			// 4-byte header and a 4096-byte payload.
			c.Write(bytes.Repeat([]byte{'.'}, minSeg-100))
			hdr := []byte("HDR:")
			payload := bytes.Repeat([]byte{'p'}, 4096)
			c.Writev([][]byte{hdr, payload})
			last := c.out.segs[len(c.out.segs)-1].b
			if len(last) != len(hdr)+len(payload) || !bytes.HasPrefix(last, hdr) {
				split.Add(1)
			}
		}}
		s := startServer(t, b, h, WithLoops(1))
		conn := dial(t, s)
		_, err := conn.Write([]byte("go"))
		require.NoError(t, err)
		got, err := readFull(conn, minSeg-100+4+4096)
		require.NoError(t, err)
		require.Equal(t, bytes.Repeat([]byte{'.'}, minSeg-100), got[:minSeg-100])
		require.Equal(t, "HDR:", string(got[minSeg-100:minSeg-96]))
		require.Equal(t, bytes.Repeat([]byte{'p'}, 4096), got[minSeg-96:])
		require.Zero(t, split.Load(), "header and payload split across segments")
	})
}
