//go:build unix

package net

import (
	"net"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPeerAddrInline: an accepted connection's peer address, kept in the
// Conn instead of as a *net.TCPAddr, reads back exactly as the client
// sees its own address, over IPv4 and IPv6 on every backend: RemoteAddr
// as one *net.TCPAddr made by the first call (calls racing to make it
// agree), RemoteAddrPort without allocating, both in OnClose too.
func TestPeerAddrInline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		for _, host := range []string{"127.0.0.1", "[::1]"} {
			t.Run(host, func(t *testing.T) {
				if host == "[::1]" {
					ln, err := net.Listen("tcp6", "[::1]:0")
					if err != nil {
						t.Skipf("no IPv6 loopback: %v", err)
					}
					ln.Close()
				}
				type seen struct {
					addr net.Addr
					ap   netip.AddrPort
				}
				opened, closed := make(chan *Conn, 1), make(chan seen, 1)
				h := &HandlerFuncs{
					Open:  func(c *Conn) { opened <- c },
					Close: func(c *Conn, err error) { closed <- seen{c.RemoteAddr(), c.RemoteAddrPort()} },
				}
				s, err := Listen("tcp", host+":0", h, WithBackend(b), WithLoops(1), WithLogger(testLogger(t)))
				require.NoError(t, err)
				t.Cleanup(func() { s.Close() })
				cl, err := net.Dial("tcp", s.Addr().String())
				require.NoError(t, err)
				want := cl.LocalAddr().(*net.TCPAddr)
				c := await(t, opened, "OnOpen")

				// The first calls, from several goroutines at once, make one
				// *net.TCPAddr, which every later call returns.
				addrs := make(chan net.Addr, 4)
				for range 4 {
					go func() { addrs <- c.RemoteAddr() }()
				}
				first := <-addrs
				for range 3 {
					require.Same(t, first, <-addrs)
				}
				got, ok := first.(*net.TCPAddr)
				require.True(t, ok, "RemoteAddr %T", first)
				require.Equal(t, want.String(), got.String())
				require.True(t, want.IP.Equal(got.IP))
				require.Equal(t, want.Port, got.Port)
				require.Equal(t, want.AddrPort().Addr().Unmap(), c.RemoteAddrPort().Addr().Unmap())
				require.Equal(t, uint16(want.Port), c.RemoteAddrPort().Port())
				require.Zero(t, testing.AllocsPerRun(100, func() { c.RemoteAddrPort() }), "RemoteAddrPort allocates")
				require.Zero(t, testing.AllocsPerRun(100, func() { c.RemoteAddr() }), "RemoteAddr allocates after the first call")

				cl.Close()
				last := await(t, closed, "OnClose")
				require.Equal(t, want.String(), last.addr.String(), "RemoteAddr in OnClose")
				require.Equal(t, uint16(want.Port), last.ap.Port(), "RemoteAddrPort in OnClose")
			})
		}
	})
}

// TestPeerAddrUnix: a Unix socket's peer, which the Conn cannot hold
// inline, is kept aside (connAux) and read back as the net.Addr it was;
// RemoteAddrPort is the zero AddrPort.
func TestPeerAddrUnix(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		opened := make(chan *Conn, 1)
		path := t.TempDir() + "/s"
		s, err := Listen("unix", path, &HandlerFuncs{Open: func(c *Conn) { opened <- c }},
			WithBackend(b), WithLoops(1), WithLogger(testLogger(t)))
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		cl, err := net.Dial("unix", path)
		require.NoError(t, err)
		defer cl.Close()
		c := await(t, opened, "OnOpen")
		require.NotNil(t, c.RemoteAddr())
		require.Equal(t, "unix", c.RemoteAddr().Network())
		require.Equal(t, stdUnnamedPeer(t), c.RemoteAddr().String())
		require.False(t, c.RemoteAddrPort().IsValid())
	})
}

// stdUnnamedPeer returns what the standard library's UnixConn.RemoteAddr
// shows, on the accepting side, for a client that dialed without binding.
func stdUnnamedPeer(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "std.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	return a.RemoteAddr().String()
}
