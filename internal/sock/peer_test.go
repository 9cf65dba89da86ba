// Linux: SO_PEERNAME and the abstract namespace, which other systems lack.
//go:build linux

package sock

import (
	"net"
	"syscall"
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

// Accept and PeerAddr report the peer as the standard library's client
// sees itself, and LocalAddr the accepted end as the client sees it, for
// every address family the loops serve.
func TestAcceptAndPeerAddr(t *testing.T) {
	for _, tc := range []struct{ network, addr string }{
		{"tcp", "127.0.0.1:0"},
		{"tcp", "[::1]:0"},
		{"unix", t.TempDir() + "/s"},
		{"unix", "@veloq-sock-test"},
	} {
		t.Run(tc.network+" "+tc.addr, func(t *testing.T) {
			ln, err := net.Listen(tc.network, tc.addr)
			if err != nil {
				t.Skipf("cannot listen on %s: %v", tc.addr, err)
			}
			defer ln.Close()
			var lfd int
			rc, err := ln.(syscallConner).SyscallConn()
			require.NoError(t, err)
			require.NoError(t, rc.Control(func(f uintptr) { lfd = int(f) }))

			var c net.Conn
			if tc.network == "unix" {
				// Bind the client too, so the peer has a name to report.
				d := net.Dialer{LocalAddr: &net.UnixAddr{Name: tc.addr + "c", Net: "unix"}}
				c, err = d.Dial("unix", tc.addr)
			} else {
				c, err = net.Dial("tcp", ln.Addr().String())
			}
			require.NoError(t, err)
			defer c.Close()

			var fd int
			var peer net.Addr
			require.Eventually(t, func() bool {
				fd, peer, err = Accept(lfd)
				return err != unix.EAGAIN
			}, 5*time.Second, time.Millisecond)
			require.NoError(t, err)
			defer unix.Close(fd)
			flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
			require.NoError(t, err)
			assert.NotZero(t, flags&unix.O_NONBLOCK, "non-blocking")
			fdFlags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			require.NoError(t, err)
			assert.NotZero(t, fdFlags&unix.FD_CLOEXEC, "close-on-exec")

			want := c.LocalAddr().String()
			assert.Equal(t, want, peer.String(), "accept")
			assert.Equal(t, tc.network, peer.Network())
			again, err := PeerAddr(fd)
			require.NoError(t, err)
			assert.Equal(t, want, again.String(), "getpeername")
			local, err := LocalAddr(fd)
			require.NoError(t, err)
			assert.Equal(t, c.RemoteAddr().String(), local.String(), "getsockname")
		})
	}
	_, _, err := Accept(-1)
	assert.ErrorIs(t, err, unix.EBADF)
}

type syscallConner interface {
	SyscallConn() (syscall.RawConn, error)
}
