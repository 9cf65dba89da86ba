package sock

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// PeerAddr answers for a connection the peer reset before it was looked
// at, where getpeername alone fails with ENOTCONN; over IPv4 and IPv6.
func TestPeerAddrAfterReset(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Skipf("cannot listen on %s: %v", addr, err)
			}
			defer ln.Close()
			c, err := net.Dial("tcp", ln.Addr().String())
			require.NoError(t, err)
			sc, err := ln.Accept()
			require.NoError(t, err)
			defer sc.Close()
			raw, err := sc.(*net.TCPConn).SyscallConn()
			require.NoError(t, err)

			require.NoError(t, c.(*net.TCPConn).SetLinger(0))
			want := c.LocalAddr().String()
			require.NoError(t, c.Close()) // RST
			var fd int
			require.NoError(t, raw.Control(func(f uintptr) { fd = int(f) }))
			require.Eventually(t, func() bool {
				_, err := unix.Getpeername(fd)
				return err == unix.ENOTCONN
			}, 5*time.Second, time.Millisecond, "the reset never arrived")

			got, err := PeerAddr(fd)
			require.NoError(t, err)
			assert.Equal(t, want, got.String())
		})
	}
}
