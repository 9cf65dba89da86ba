//go:build unix

package sock

import (
	"errors"
	"net"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestResolve(t *testing.T) {
	tests := []struct {
		network, addr string
		family        int
		want          string
		err           bool
	}{
		{"tcp", "127.0.0.1:80", unix.AF_INET, "127.0.0.1:80", false},
		{"tcp", "[::1]:8080", unix.AF_INET6, "[::1]:8080", false},
		{"tcp6", "[::1]:1", unix.AF_INET6, "[::1]:1", false},
		{"tcp4", "[::1]:1", 0, "", true},
		{"tcp", ":9000", unix.AF_INET, "0.0.0.0:9000", false},
		{"tcp", ":http", unix.AF_INET, "0.0.0.0:80", false},
		{"tcp6", ":9000", unix.AF_INET6, "[::]:9000", false},
		{"tcp", "127.0.0.1:http", unix.AF_INET, "127.0.0.1:80", false},
		{"tcp", "localhost:0", 0, "", false},
		{"udp", "127.0.0.1:1", 0, "", true},
		{"tcp", "no-port", 0, "", true},
	}
	for _, tt := range tests {
		a, err := Resolve(tt.network, tt.addr)
		if (err != nil) != tt.err {
			t.Errorf("Resolve(%q,%q) err=%v", tt.network, tt.addr, err)
			continue
		}
		if err != nil || tt.want == "" {
			continue
		}
		if a.Family != tt.family || a.Net.String() != tt.want {
			t.Errorf("Resolve(%q,%q) = %d %v, want %d %s", tt.network, tt.addr, a.Family, a.Net, tt.family, tt.want)
		}
	}
	if _, err := Resolve("udp", "x:1"); !errors.Is(err, ErrNetwork) {
		t.Errorf("udp: %v, want ErrNetwork", err)
	}
}

// A listener made here accepts a connection from the standard library, for
// each family, and ReusePort lets two sockets share one port.
func TestListenAcceptsStdlibDial(t *testing.T) {
	for _, c := range []struct{ network, addr string }{
		{"tcp", "127.0.0.1:0"}, {"tcp", "[::1]:0"}, {"unix", filepath.Join(t.TempDir(), "s")},
	} {
		a, err := Resolve(c.network, c.addr)
		if err != nil {
			t.Fatal(err)
		}
		fd, local, err := Listen(a, true, 16)
		if err != nil {
			if c.addr == "[::1]:0" {
				t.Logf("no IPv6 loopback: %v", err)
				continue
			}
			t.Fatal(err)
		}
		conn, err := net.Dial(c.network, local.String())
		if err != nil {
			t.Fatalf("dial %s: %v", local, err)
		}
		conn.Close()
		if c.network == "tcp" {
			a2, _ := Resolve("tcp", local.String())
			fd2, _, err := Listen(a2, true, 16)
			if err != nil {
				t.Fatalf("second SO_REUSEPORT listener on %s: %v", local, err)
			}
			unix.Close(fd2)
		}
		unix.Close(fd)
	}
}
