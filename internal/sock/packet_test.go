//go:build unix

package sock

import (
	"errors"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

func TestResolvePacket(t *testing.T) {
	tests := []struct {
		network, addr string
		family        int
		want          string
		err           error
	}{
		{"udp", "127.0.0.1:53", unix.AF_INET, "127.0.0.1:53", nil},
		{"udp", "[::1]:53", unix.AF_INET6, "[::1]:53", nil},
		{"udp6", ":53", unix.AF_INET6, "[::]:53", nil},
		{"udp4", ":53", unix.AF_INET, "0.0.0.0:53", nil},
		{"unixgram", "/tmp/x.sock", unix.AF_UNIX, "/tmp/x.sock", nil},
		{"unixgram", "@abstract", unix.AF_UNIX, "@abstract", nil},
		{"tcp", "127.0.0.1:53", 0, "", ErrNetwork},
		{"unix", "/tmp/x.sock", 0, "", ErrNetwork},
	}
	for _, tt := range tests {
		a, err := ResolvePacket(tt.network, tt.addr)
		if !errors.Is(err, tt.err) {
			t.Errorf("ResolvePacket(%q, %q): %v, want %v", tt.network, tt.addr, err, tt.err)
			continue
		}
		if err != nil {
			continue
		}
		if a.Family != tt.family || a.Net.String() != tt.want || a.Net.Network() != map[bool]string{true: "unixgram", false: "udp"}[tt.family == unix.AF_UNIX] {
			t.Errorf("ResolvePacket(%q, %q) = %d %s %v", tt.network, tt.addr, a.Family, a.Net.Network(), a.Net)
		}
	}
	if _, err := ResolvePacket("udp4", "[::1]:53"); err == nil {
		t.Error("udp4 resolved an IPv6 address")
	}
}

// A socket made by ListenPacket receives from the standard library, and a
// second one can share its port only with reusePort; ProbeBindPacket sees
// the port taken.
func TestListenPacket(t *testing.T) {
	a, err := ResolvePacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fd, local, err := ListenPacket(a, true, 1<<20, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if local.Port() == 0 || !local.Addr().Is4() {
		t.Fatalf("local %s", local)
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(local))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	var buf [8]byte
	var n int
	for { // the socket is non-blocking: the datagram is there once the write returned on loopback
		n, _, err = unix.Recvfrom(fd, buf[:], 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil || string(buf[:n]) != "hi" {
		t.Fatalf("recvfrom: %q %v", buf[:n], err)
	}
	same, _ := ResolvePacket("udp", local.String())
	if err := ProbeBindPacket(same); !errors.Is(err, unix.EADDRINUSE) {
		t.Errorf("ProbeBindPacket on a taken port: %v", err)
	}
	fd2, _, err := ListenPacket(same, true, 0, 0)
	if err != nil {
		t.Fatalf("a second SO_REUSEPORT socket: %v", err)
	}
	unix.Close(fd2)
	if _, _, err := ListenPacket(same, false, 0, 0); !errors.Is(err, unix.EADDRINUSE) {
		t.Errorf("a socket without SO_REUSEPORT on a taken port: %v", err)
	}
}
