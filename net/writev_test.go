//go:build linux

// Linux only: the test counts segments with TCP_INFO, which macOS and the
// BSDs do not have in this form.

package net

import (
	"bytes"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestQueuedSegmentsLeaveInOneSend: writes queued in one callback that
// fill more than one segment of the output queue (a small head, then a
// body part that overflows its 4 KiB segment) leave in one send, writev on
// epoll and the portable backend, SENDMSG on io_uring, so the peer
// receives them as one TCP segment. Sent one segment at a time they made
// two system calls, or two sends one completion apart, and two TCP
// segments through the loopback stack.
func TestQueuedSegmentsLeaveInOneSend(t *testing.T) {
	head := bytes.Repeat([]byte("h"), 300)
	body := bytes.Repeat([]byte("b"), 16<<10)
	forEachBackend(t, func(t *testing.T, b Backend) {
		s := startServer(t, b, &HandlerFuncs{Data: func(c *Conn) {
			c.Discard(c.Buffered())
			c.Write(head)
			c.Write(body)
		}}, WithLoops(1))
		c := dial(t, s)
		for round := range 3 {
			_, err := c.Write([]byte("x"))
			require.NoError(t, err)
			got, err := readFull(c, len(head)+len(body))
			require.NoError(t, err)
			require.Equal(t, append(append([]byte(nil), head...), body...), got, "round %d", round)
		}
		info := tcpInfo(t, c)
		require.Equal(t, uint32(3), info.Data_segs_in, "TCP segments with data received for 3 answers")
	})
}

// tcpInfo reads c's TCP_INFO.
func tcpInfo(t *testing.T, c net.Conn) *unix.TCPInfo {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	var info *unix.TCPInfo
	var gerr error
	require.NoError(t, rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}))
	require.NoError(t, gerr)
	return info
}
