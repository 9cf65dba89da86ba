package main

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// udpServer echoes on a loopback port until the test ends; reply decides
// what goes back for the n-th datagram (nil: nothing).
func udpServer(t *testing.T, reply func(n int, p []byte) []byte) netip.AddrPort {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 65536)
		for n := 0; ; n++ {
			k, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if out := reply(n, buf[:k]); out != nil {
				c.WriteToUDPAddrPort(out, from)
			}
		}
	}()
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}

func load(t *testing.T, to netip.AddrPort, size int) Result {
	t.Helper()
	g, err := newGen(config{ports: 4, window: 4, size: size, duration: 300 * time.Millisecond,
		warmup: 50 * time.Millisecond, timeout: 50 * time.Millisecond}, to)
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	return g.run()
}

func TestEcho(t *testing.T) {
	to := udpServer(t, func(_ int, p []byte) []byte { return p })
	for _, size := range []int{8, 64, 1200} {
		r := load(t, to, size)
		if r.Received == 0 || r.Errors != 0 || r.Lost != 0 || r.RPS <= 0 {
			t.Errorf("size %d: %+v", size, r)
		}
	}
}

// A server that answers only every other datagram: the generator counts
// the rest as lost, and goes on.
func TestLoss(t *testing.T) {
	to := udpServer(t, func(n int, p []byte) []byte {
		if n%2 == 1 {
			return nil
		}
		return p
	})
	r := load(t, to, 64)
	if r.Lost == 0 || r.Loss <= 0 || r.Loss >= 1 || r.Received == 0 {
		t.Errorf("loss not counted: %+v", r)
	}
}

// A server that answers with the wrong length is counted as errors.
func TestBadEcho(t *testing.T) {
	to := udpServer(t, func(_ int, p []byte) []byte { return p[:len(p)-1] })
	if r := load(t, to, 64); r.Errors == 0 || r.FirstError == "" {
		t.Errorf("bad echoes not counted: %+v", r)
	}
}

func TestRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-addr", "10.1.1.1:9000"},
		{"-size", "4"},
		{"-window", "0"},
		{"-ports", "0"},
		{"-duration", "0s"},
	} {
		if err := run(args); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}
