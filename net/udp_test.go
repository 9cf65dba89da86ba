//go:build linux

// Linux only: exercises recvmmsg, GSO/GRO and the io_uring and epoll datagram paths.

package net

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/internal/backendtest"
	"github.com/veloq/veloq/internal/sock"
)

// udpEcho writes every datagram back to its sender.
func udpEcho() PacketHandler {
	return PacketHandlerFunc(func(pc *PacketConn, p []byte, from netip.AddrPort) {
		_ = pc.WriteTo(p, from)
	})
}

// startUDP listens on addr and closes the listener (and its server) when
// the test ends.
func startUDP(t *testing.T, b Backend, addr string, h PacketHandler, opts ...Option) *PacketListener {
	t.Helper()
	opts = append([]Option{WithBackend(b), WithLoops(2), WithLogger(testLogger(t))}, opts...)
	network := "udp"
	if addr[0] == '[' {
		network = "udp6"
	}
	pl, err := ListenPacket(network, addr, h, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pl.Close()) })
	return pl
}

// udpClient is a standard-library socket talking to pl, with a deadline
// that keeps a broken test from hanging.
func udpClient(t *testing.T, pl *PacketListener) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(pl.Addr()))
	require.NoError(t, err)
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
	_ = c.SetReadBuffer(4 << 20)
	t.Cleanup(func() { c.Close() })
	return c
}

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = seed + byte(i*7)
	}
	return p
}

func TestUDPEcho(t *testing.T) {
	sizes := []int{0, 1, 512, 1200, maxDatagram4}
	offloads := []struct {
		name     string
		gso, gro bool
	}{{"offload", true, true}, {"no-offload", false, false}}
	forEachBackend(t, func(t *testing.T, b Backend) {
		for _, o := range offloads {
			t.Run(o.name, func(t *testing.T) {
				pl := startUDP(t, b, "127.0.0.1:0", udpEcho(), WithUDPOffload(o.gso, o.gro))
				if !o.gso {
					require.False(t, pl.Stats().GSO)
				}
				c := udpClient(t, pl)
				buf := make([]byte, 65536)
				for _, n := range sizes {
					want := pattern(n, byte(n))
					_, err := c.Write(want)
					require.NoError(t, err)
					got, err := c.Read(buf)
					require.NoError(t, err, "echo of %d bytes", n)
					require.Equal(t, want, buf[:got], "echo of %d bytes", n)
				}
				// The counters are added after the send returns, which may be
				// after the client has its reply.
				require.Eventually(t, func() bool { return pl.Stats().Sent == uint64(len(sizes)) }, 10*time.Second, time.Millisecond)
				s := pl.Stats()
				require.EqualValues(t, len(sizes), s.Received)
				require.Zero(t, s.Errors)
				require.Zero(t, s.Truncated)
			})
		}
	})
}

func TestUDPEchoIPv6(t *testing.T) {
	if ln, err := net.ListenPacket("udp6", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		ln.Close()
	}
	forEachBackend(t, func(t *testing.T, b Backend) {
		for _, addr := range []string{"[::1]:0", "[::]:0"} {
			t.Run(addr, func(t *testing.T) {
				pl := startUDP(t, b, addr, udpEcho())
				to := netip.AddrPortFrom(netip.IPv6Loopback(), pl.Addr().Port())
				c, err := net.DialUDP("udp6", nil, net.UDPAddrFromAddrPort(to))
				require.NoError(t, err)
				defer c.Close()
				require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
				buf := make([]byte, 65536)
				for _, n := range []int{1, 512, maxDatagram6 - 40} {
					want := pattern(n, 3)
					_, err := c.Write(want)
					require.NoError(t, err)
					got, err := c.Read(buf)
					require.NoError(t, err)
					require.Equal(t, want, buf[:got])
				}
			})
		}
	})
}

// TestUDPManyPeers: 10,000 datagrams from 100 peers, each keeping at most
// 10 in flight so that no socket buffer on loopback overflows: none may
// be lost, and every reply reaches the peer that sent the request.
func TestUDPManyPeers(t *testing.T) {
	const peers, each, window = 100, 100, 10
	forEachBackend(t, func(t *testing.T, b Backend) {
		pl := startUDP(t, b, "127.0.0.1:0", udpEcho())
		var wg sync.WaitGroup
		errs := make(chan error, peers)
		for p := 0; p < peers; p++ {
			c := udpClient(t, pl)
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 64)
				for sent := 0; sent < each; sent += window {
					for i := sent; i < sent+window; i++ {
						if _, err := c.Write([]byte(fmt.Sprintf("%d-%d", p, i))); err != nil {
							errs <- err
							return
						}
					}
					for i := sent; i < sent+window; i++ {
						n, err := c.Read(buf)
						if err != nil {
							errs <- fmt.Errorf("peer %d, reply %d: %w", p, i, err)
							return
						}
						if want := fmt.Sprintf("%d-%d", p, i); string(buf[:n]) != want {
							errs <- fmt.Errorf("peer %d got %q, want %q", p, buf[:n], want)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		require.Eventually(t, func() bool { return pl.Stats().Sent == peers*each }, 10*time.Second, time.Millisecond)
		s := pl.Stats()
		require.EqualValues(t, peers*each, s.Received)
		require.Zero(t, s.Dropped)
	})
}

// TestUDPOneInFlight: many peers with one datagram in flight each (a
// DNS-like load) are served in batches (Config.BatchWait: the datagrams
// count as input, their senders as active peers), and a lone peer after
// them is answered at once, not held back waiting for a batch.
func TestUDPOneInFlight(t *testing.T) {
	const peers, rounds = 64, 100
	forEachBackend(t, func(t *testing.T, b Backend) {
		if b == BackendPortable {
			t.Skip("batched waits (Config.BatchWait) are an io_uring and epoll feature; the portable backend waits in the Go runtime")
		}
		// The most senders the loop's batching saw active at once, read on
		// the loop by the handler.
		var active atomic.Uint32
		pl := startUDP(t, b, "127.0.0.1:0", PacketHandlerFunc(func(pc *PacketConn, p []byte, from netip.AddrPort) {
			var a *activity
			switch be := pc.Loop().be.(type) {
			case *uringBackend:
				a = &be.act
			case *epollBackend:
				a = &be.act
			}
			if n := max(a.seen, a.active); n > active.Load() {
				active.Store(n)
			}
			_ = pc.WriteTo(p, from)
		}), WithLoops(1))
		clients := make([]*net.UDPConn, peers)
		for i := range clients {
			clients[i] = udpClient(t, pl)
		}
		var wg sync.WaitGroup
		errs := make(chan error, peers)
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 64)
				for r := 0; r < rounds; r++ {
					want := fmt.Sprintf("%d-%d", i, r)
					if _, err := c.Write([]byte(want)); err != nil {
						errs <- err
						return
					}
					n, err := c.Read(buf)
					if err != nil || string(buf[:n]) != want {
						errs <- fmt.Errorf("peer %d round %d: %q, %v", i, r, buf[:n], err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		st := pl.Server().Stats()[0]
		t.Logf("%d datagrams in %d loop iterations; %d senders seen active", peers*rounds, st.Iterations, active.Load())
		// 64 senders share 1,024 marks: a few may share one.
		require.GreaterOrEqual(t, active.Load(), uint32(peers/2), "datagram senders count as active peers for batched waits")
		// The lone peer: each echo comes back although no batch fills.
		c, buf := clients[0], make([]byte, 64)
		for r := 0; r < 20; r++ {
			_, err := c.Write([]byte("lone"))
			require.NoError(t, err)
			n, err := c.Read(buf)
			require.NoError(t, err)
			require.Equal(t, "lone", string(buf[:n]))
		}
		require.Eventually(t, func() bool { return pl.Stats().Sent == peers*rounds+20 }, 10*time.Second, time.Millisecond)
	})
}

// TestUDPTruncated: a datagram longer than the receive buffer is counted
// and dropped, and the socket goes on with the next one.
func TestUDPTruncated(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		pl := startUDP(t, b, "127.0.0.1:0", udpEcho(), WithPacketBuffer(1024), WithUDPOffload(false, false))
		c := udpClient(t, pl)
		_, err := c.Write(pattern(2000, 1))
		require.NoError(t, err)
		_, err = c.Write([]byte("after"))
		require.NoError(t, err)
		buf := make([]byte, 4096)
		n, err := c.Read(buf)
		require.NoError(t, err)
		require.Equal(t, "after", string(buf[:n]))
		s := pl.Stats()
		require.EqualValues(t, 1, s.Truncated)
		require.EqualValues(t, 1, s.Received)
	})
}

// TestUDPGSO: a handler that answers with a run of same-size datagrams
// to one peer sends them as one GSO buffer where the kernel offers it;
// the peer gets them as separate datagrams either way.
func TestUDPGSO(t *testing.T) {
	const run, size = 20, 1000
	forEachBackend(t, func(t *testing.T, b Backend) {
		for _, gso := range []bool{true, false} {
			t.Run(fmt.Sprintf("gso=%v", gso), func(t *testing.T) {
				h := PacketHandlerFunc(func(pc *PacketConn, p []byte, from netip.AddrPort) {
					for i := 0; i < run; i++ {
						_ = pc.WriteTo(pattern(size, byte(i)), from)
					}
					_ = pc.WriteTo([]byte("end"), from)
				})
				pl := startUDP(t, b, "127.0.0.1:0", h, WithUDPOffload(gso, false))
				c := udpClient(t, pl)
				_, err := c.Write([]byte("go"))
				require.NoError(t, err)
				buf := make([]byte, 65536)
				for i := 0; i < run; i++ {
					n, err := c.Read(buf)
					require.NoError(t, err)
					require.Equal(t, pattern(size, byte(i)), buf[:n], "datagram %d", i)
				}
				n, err := c.Read(buf)
				require.NoError(t, err)
				require.Equal(t, "end", string(buf[:n]))
				require.Eventually(t, func() bool { return pl.Stats().Sent == run+1 }, 10*time.Second, time.Millisecond)
				s := pl.Stats()
				if gso && s.GSO {
					require.NotZero(t, s.GSOSends)
				}
				if !gso {
					require.Zero(t, s.GSOSends)
				}
			})
		}
	})
}

// TestUDPGRO: a GSO sender's run arrives at a GRO socket as one receive
// (the kernel keeps the buffer whole for it), which the loop splits back
// into datagrams; without GRO the kernel splits it.
func TestUDPGRO(t *testing.T) {
	const run, size = 16, 700
	forEachBackend(t, func(t *testing.T, b Backend) {
		for _, gro := range []bool{true, false} {
			t.Run(fmt.Sprintf("gro=%v", gro), func(t *testing.T) {
				var mu sync.Mutex
				var got [][]byte
				recv := startUDP(t, b, "127.0.0.1:0", PacketHandlerFunc(func(pc *PacketConn, p []byte, from netip.AddrPort) {
					mu.Lock()
					got = append(got, append([]byte(nil), p...))
					mu.Unlock()
				}), WithUDPOffload(false, gro), WithLoops(1))
				send := startUDP(t, b, "127.0.0.1:0", udpEcho(), WithUDPOffload(true, false), WithLoops(1))
				pc := send.Conns()[0]
				require.NoError(t, pc.Loop().Post(func() {
					for i := 0; i < run; i++ {
						_ = pc.WriteTo(pattern(size, byte(i)), recv.Addr())
					}
				}))
				require.Eventually(t, func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(got) == run
				}, 10*time.Second, time.Millisecond)
				mu.Lock()
				for i, p := range got {
					require.Equal(t, pattern(size, byte(i)), p, "datagram %d", i)
				}
				mu.Unlock()
				// The counters are added after the handler calls and the
				// send: wait for them, not for what the handler saw.
				require.Eventually(t, func() bool {
					return recv.Stats().Received == run && send.Stats().Sent == run
				}, 10*time.Second, time.Millisecond)
				s := recv.Stats()
				t.Logf("receiver GRO %v, %d GRO receives; sender %d GSO sends", s.GRO, s.GROReceives, send.Stats().GSOSends)
				require.EqualValues(t, run, s.Received)
				if gro && s.GRO && send.Stats().GSOSends > 0 {
					require.NotZero(t, s.GROReceives)
				}
				if !gro {
					require.Zero(t, s.GROReceives)
				}
			})
		}
	})
}

// TestUDPAsyncWriteTo: goroutines other than the loop send through a
// socket; every datagram arrives.
func TestUDPAsyncWriteTo(t *testing.T) {
	const writers, each = 4, 50
	forEachBackend(t, func(t *testing.T, b Backend) {
		peer := make(chan netip.AddrPort, 1)
		pl := startUDP(t, b, "127.0.0.1:0", PacketHandlerFunc(func(pc *PacketConn, p []byte, from netip.AddrPort) {
			select {
			case peer <- from:
			default:
			}
		}), WithLoops(1))
		c := udpClient(t, pl)
		_, err := c.Write([]byte("hello"))
		require.NoError(t, err)
		to := await(t, peer, "no datagram reached the handler")
		pc := pl.Conns()[0]
		require.ErrorIs(t, pc.WriteTo([]byte("x"), to), ErrNotOnLoop)
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					if err := pc.AsyncWriteTo([]byte(fmt.Sprintf("%d-%d", w, i)), to); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		seen := map[string]bool{}
		buf := make([]byte, 64)
		for len(seen) < writers*each {
			n, err := c.Read(buf)
			require.NoError(t, err)
			seen[string(buf[:n])] = true
		}
		require.ErrorIs(t, pc.AsyncWriteTo(make([]byte, maxDatagram4+1), to), ErrPacketTooLarge)
		require.ErrorIs(t, pc.AsyncWriteTo([]byte("x"), netip.AddrPort{}), ErrPacketAddr)
	})
}

// TestUDPQueueBound: output past WithMaxPacketQueue is dropped and
// counted, what fits is sent, and the socket goes on.
func TestUDPQueueBound(t *testing.T) {
	const burst, size, bound = 100, 100, 1000 // (100+64) bytes each: 6 fit
	forEachBackend(t, func(t *testing.T, b Backend) {
		var full atomic.Int32
		pl := startUDP(t, b, "127.0.0.1:0", PacketHandlerFunc(func(pc *PacketConn, p []byte, from netip.AddrPort) {
			for i := 0; i < burst; i++ {
				if err := pc.WriteTo(pattern(size, byte(i)), from); errors.Is(err, ErrPacketQueueFull) {
					full.Add(1)
				}
			}
		}), WithMaxPacketQueue(bound), WithUDPOffload(false, false))
		c := udpClient(t, pl)
		_, err := c.Write([]byte("go"))
		require.NoError(t, err)
		fit := bound / (size + pktOverhead)
		buf := make([]byte, 4096)
		for i := 0; i < fit; i++ {
			n, err := c.Read(buf)
			require.NoError(t, err)
			require.Equal(t, pattern(size, byte(i)), buf[:n])
		}
		require.Eventually(t, func() bool { return pl.Stats().Sent == uint64(fit) }, 10*time.Second, time.Millisecond)
		s := pl.Stats()
		require.EqualValues(t, burst-fit, s.Dropped)
		require.EqualValues(t, burst-fit, full.Load())
		// The queue emptied: the next burst is bounded the same way.
		_, err = c.Write([]byte("again"))
		require.NoError(t, err)
		for i := 0; i < fit; i++ {
			_, err := c.Read(buf)
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool { return pl.Stats().Dropped == 2*uint64(burst-fit) }, 10*time.Second, time.Millisecond)
	})
}

// TestUDPRefused: a connected socket whose peer has no socket gets
// ECONNREFUSED from the kernel (ICMP port unreachable); it is counted and
// the socket keeps working once the peer is there.
func TestUDPRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		s, err := NewServer(packetOnly{}, WithBackend(b), WithLoops(1), WithLogger(testLogger(t)))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		// A port with nobody on it: bound, noted and closed.
		gone, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		require.NoError(t, err)
		addr := gone.LocalAddr().(*net.UDPAddr).AddrPort()
		require.NoError(t, gone.Close())

		replies := make(chan string, 4)
		pc, err := s.DialPacket("udp", addr.String(), PacketHandlerFunc(func(pc *PacketConn, p []byte, from netip.AddrPort) {
			if from != addr {
				t.Errorf("datagram from %s on a socket connected to %s", from, addr)
			}
			replies <- string(p)
		}))
		require.NoError(t, err)
		require.Equal(t, addr, pc.RemoteAddr())
		write := func(p string) {
			require.NoError(t, pc.Loop().Post(func() {
				if err := pc.Write([]byte(p)); err != nil {
					t.Error(err) // on the loop: not require
				}
			}))
		}
		require.Eventually(t, func() bool {
			write("anyone?")
			return pc.Stats().Refused > 0
		}, 10*time.Second, 5*time.Millisecond)

		back, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
		require.NoError(t, err)
		defer back.Close()
		// The refusal of the last probe may still be pending on the
		// socket: the kernel hands it to the next send, which then
		// fails and loses its datagram, as UDP may. So "now?" goes
		// again until it arrives.
		buf := make([]byte, 64)
		var from netip.AddrPort
		deadline := time.Now().Add(10 * time.Second)
		for from == (netip.AddrPort{}) && time.Now().Before(deadline) {
			write("now?")
			require.NoError(t, back.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
			for { // a probe posted before the count was seen may come first
				n, f, err := back.ReadFromUDPAddrPort(buf)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					break
				}
				require.NoError(t, err)
				if string(buf[:n]) == "now?" {
					from = f
					break
				}
				require.Equal(t, "anyone?", string(buf[:n]))
			}
		}
		require.NotZero(t, from, "no datagram reached the port once it was bound again")
		require.NoError(t, back.SetReadDeadline(time.Time{}))
		_, err = back.WriteToUDPAddrPort([]byte("yes"), from)
		require.NoError(t, err)
		require.Equal(t, "yes", await(t, replies, "no reply on the connected socket"))
		require.NoError(t, pc.Close())
		await(t, pc.Done(), "the socket was not released")
	})
}

// TestUDPPanic: a panicking handler loses its datagram and nothing else.
func TestUDPPanic(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		pl := startUDP(t, b, "127.0.0.1:0", PacketHandlerFunc(func(pc *PacketConn, p []byte, from netip.AddrPort) {
			if string(p) == "boom" {
				panic("boom")
			}
			_ = pc.WriteTo(p, from)
		}), WithLoops(1), WithLogger(testLogger(t)))
		c := udpClient(t, pl)
		for _, m := range []string{"boom", "ok"} {
			_, err := c.Write([]byte(m))
			require.NoError(t, err)
		}
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		require.NoError(t, err)
		require.Equal(t, "ok", string(buf[:n]))
		require.EqualValues(t, 1, pl.Stats().Panics)
	})
}

// TestUDPShutdown: closing a listener (and its server) releases every
// descriptor, with datagrams in flight.
func TestUDPShutdown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		before := backendtest.CountFDs(t)
		pl, err := ListenPacket("udp", "127.0.0.1:0", udpEcho(), WithBackend(b), WithLoops(2), WithLogger(testLogger(t)))
		require.NoError(t, err)
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(pl.Addr()))
		require.NoError(t, err)
		for i := 0; i < 100; i++ {
			_, _ = c.Write(bytes.Repeat([]byte{'x'}, 100))
		}
		require.NoError(t, c.Close())
		require.NoError(t, pl.Close())
		for _, pc := range pl.Conns() {
			await(t, pc.Done(), "a socket was not released")
			require.ErrorIs(t, pc.AsyncWriteTo([]byte("late"), pl.Addr()), ErrClosed)
		}
		require.Equal(t, before, backendtest.CountFDs(t))

		// Server.Shutdown closes the datagram sockets of a server that
		// also serves TCP.
		srv, err := NewServer(echoHandler(), WithBackend(b), WithLoops(2), WithLogger(testLogger(t)))
		require.NoError(t, err)
		_, err = srv.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		pl, err = srv.ListenPacket("udp", "127.0.0.1:0", udpEcho())
		require.NoError(t, err)
		pc, err := srv.DialPacket("udp", pl.Addr().String(), udpEcho())
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
		for _, pc := range append(pl.Conns(), pc) {
			await(t, pc.Done(), "a socket outlived Shutdown")
		}
		require.NoError(t, pl.Close()) // already closed with the server: nothing left to do
		require.Equal(t, before, backendtest.CountFDs(t))
	})
}

// TestUDPListenErrors: bad networks and a taken port are refused with
// errors callers can test.
func TestUDPListenErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		_, err := ListenPacket("tcp", "127.0.0.1:0", udpEcho(), WithBackend(b), WithLoops(1))
		require.ErrorIs(t, err, sock.ErrNetwork)
		_, err = Listen("udp", "127.0.0.1:0", echoHandler(), WithBackend(b), WithLoops(1))
		require.ErrorIs(t, err, sock.ErrNetwork)
		require.ErrorContains(t, err, "use ListenPacket")
		taken, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		require.NoError(t, err)
		defer taken.Close()
		_, err = ListenPacket("udp", taken.LocalAddr().String(), udpEcho(), WithBackend(b), WithLoops(2))
		require.ErrorIs(t, err, unix.EADDRINUSE)
		s, err := NewServer(packetOnly{}, WithBackend(b), WithLoops(1))
		require.NoError(t, err)
		_, err = s.ListenPacket("udp", "127.0.0.1:0", nil)
		require.Error(t, err)
		require.NoError(t, s.Close())
		_, err = s.ListenPacket("udp", "127.0.0.1:0", udpEcho())
		require.ErrorIs(t, err, ErrServerClosed)
	})
}

// TestUDPUringReadiness: where io_uring cannot have a buffer ring for
// datagrams, sockets receive by readiness (multishot POLLIN) and the
// loop's recvmmsg, as on epoll; echo and truncation still hold.
func TestUDPUringReadiness(t *testing.T) {
	if err := BackendUring.Available(); err != nil {
		backendtest.SkipUnavailable(t, string(BackendUring), err)
	}
	s, err := NewServer(packetOnly{}, WithBackend(BackendUring), WithLoops(1), WithLogger(testLogger(t)), WithPacketBuffer(1024))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	l := s.Loops()[0]
	done := make(chan struct{})
	require.NoError(t, l.Post(func() { l.be.(*uringBackend).prx.failed = true; close(done) }))
	<-done
	pl, err := s.ListenPacket("udp", "127.0.0.1:0", udpEcho())
	require.NoError(t, err)
	c := udpClient(t, pl)
	buf := make([]byte, 4096)
	for _, n := range []int{0, 1, 512, 2000, 1000} {
		_, err := c.Write(pattern(n, 9))
		require.NoError(t, err)
		if n > 1024 {
			continue // truncated: no echo
		}
		got, err := c.Read(buf)
		require.NoError(t, err)
		require.Equal(t, pattern(n, 9), buf[:got])
	}
	require.EqualValues(t, 1, pl.Stats().Truncated)
	require.Nil(t, l.be.(*uringBackend).prx.br)
}

// TestUDPSendError: datagrams the kernel refuses (here: to port 0) are
// dropped and counted, a GSO run of them too, and the datagrams queued
// with them still leave.
func TestUDPSendError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		nowhere := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0)
		pl := startUDP(t, b, "127.0.0.1:0", PacketHandlerFunc(func(pc *PacketConn, p []byte, from netip.AddrPort) {
			// On the loop: t.Error, not require (FailNow would end the loop's goroutine).
			for i := 0; i < 3; i++ {
				if err := pc.WriteTo(pattern(100, 1), nowhere); err != nil {
					t.Error(err)
				}
			}
			if err := pc.WriteTo(p, from); err != nil {
				t.Error(err)
			}
		}), WithLoops(1))
		c := udpClient(t, pl)
		for i := 0; i < 2; i++ {
			_, err := c.Write([]byte("ok"))
			require.NoError(t, err)
			buf := make([]byte, 64)
			n, err := c.Read(buf)
			require.NoError(t, err)
			require.Equal(t, "ok", string(buf[:n]))
		}
		require.Eventually(t, func() bool { return pl.Stats().Sent == 2 }, 10*time.Second, time.Millisecond)
		s := pl.Stats()
		require.EqualValues(t, 6, s.Errors)
		require.Zero(t, s.Refused)
	})
}

// TestUDPBacklog: datagrams that piled up while the loop was busy are all
// received and answered: more than io_uring's ring of buffers holds at
// once (its receive runs dry and is re-armed) and more than epoll's
// receive rounds take per report (the loop comes back by itself).
func TestUDPBacklog(t *testing.T) {
	const n = 500
	forEachBackend(t, func(t *testing.T, b Backend) {
		pl := startUDP(t, b, "127.0.0.1:0", udpEcho(), WithLoops(1))
		c := udpClient(t, pl)
		release := make(chan struct{})
		busy := make(chan struct{})
		require.NoError(t, pl.Conns()[0].Loop().Post(func() {
			close(busy)
			<-release // the loop waits here while the datagrams pile up
		}))
		<-busy
		for i := 0; i < n; i++ {
			_, err := c.Write([]byte(fmt.Sprint(i)))
			require.NoError(t, err)
		}
		close(release)
		seen := make(map[string]bool, n)
		buf := make([]byte, 64)
		for len(seen) < n {
			k, err := c.Read(buf)
			require.NoError(t, err, "after %d echoes", len(seen))
			seen[string(buf[:k])] = true
		}
		require.EqualValues(t, n, pl.Stats().Received)
	})
}

// TestUDPKernelDrops: datagrams the kernel drops because the socket's
// receive buffer is full are reported (KernelDrops), as the kernel counts
// them (/proc/net/udp), and are exactly what was sent and never received.
// Output-queue drops (Dropped) stay 0.
func TestUDPKernelDrops(t *testing.T) {
	// Below netdev_max_backlog (1,000), so that no datagram is lost on
	// loopback before it reaches the socket; far more than the smallest
	// receive buffer holds (about 5 of 100 bytes).
	const n = 200
	forEachBackend(t, func(t *testing.T, b Backend) {
		var handled atomic.Int64
		pl := startUDP(t, b, "127.0.0.1:0", PacketHandlerFunc(func(*PacketConn, []byte, netip.AddrPort) {
			handled.Add(1)
		}), WithLoops(1), WithPacketSocketBuffers(1, 0), WithUDPOffload(false, false))
		pc := pl.Conns()[0]
		c := udpClient(t, pl)
		release := make(chan struct{})
		busy := make(chan struct{})
		require.NoError(t, pc.Loop().Post(func() {
			close(busy)
			<-release // the socket's buffer fills while the loop waits here
		}))
		<-busy
		for i := 0; i < n; i++ {
			_, err := c.Write(pattern(100, byte(i)))
			require.NoError(t, err)
		}
		// A loopback send reaches the socket (or its drop counter) before
		// it returns, so the count is complete; Stats reads it from this
		// goroutine while the loop is blocked.
		s := pl.Stats()
		require.NotZero(t, s.KernelDrops)
		require.Less(t, s.KernelDrops, uint64(n))
		require.Equal(t, procUDPDrops(t, pc.fd), s.KernelDrops)
		close(release)
		require.Eventually(t, func() bool {
			s := pl.Stats()
			return s.Received+s.KernelDrops == n && uint64(handled.Load()) == s.Received
		}, 10*time.Second, time.Millisecond)
		s = pl.Stats()
		t.Logf("%d received, %d dropped by the kernel", s.Received, s.KernelDrops)
		require.Zero(t, s.Dropped)
		require.Zero(t, s.Truncated)
		// Once the socket is closed, the last reading stays.
		require.NoError(t, pc.Close())
		await(t, pc.Done(), "the socket was not released")
		require.Equal(t, s.KernelDrops, pc.Stats().KernelDrops)
	})
}

// procUDPDrops returns the drops column of /proc/net/udp for socket fd.
func procUDPDrops(t *testing.T, fd int) uint64 {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st))
	b, err := os.ReadFile("/proc/net/udp")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
		f := strings.Fields(line)
		if len(f) >= 13 && f[9] == strconv.FormatUint(st.Ino, 10) {
			d, err := strconv.ParseUint(f[12], 10, 64)
			require.NoError(t, err)
			return d
		}
	}
	t.Fatalf("socket inode %d not in /proc/net/udp", st.Ino)
	return 0
}

// shortDir is a temporary directory with a path short enough for Unix
// socket names (108 bytes), removed when the test ends.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "vq")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// TestUnixgram: a unixgram listener answers with Reply (its senders have
// paths, not AddrPorts), a dialled unixgram socket talks to a standard
// library peer, and closing the listener removes its socket file.
func TestUnixgram(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		dir := shortDir(t)
		path := filepath.Join(dir, "srv")
		var wrongAddr atomic.Int32
		pl, err := ListenPacket("unixgram", path, PacketHandlerFunc(func(pc *PacketConn, p []byte, from netip.AddrPort) {
			if from.IsValid() || !errors.Is(pc.WriteTo(p, netip.MustParseAddrPort("127.0.0.1:1")), ErrPacketAddr) {
				wrongAddr.Add(1)
			}
			if err := pc.Reply(p); err != nil {
				t.Error(err) // on the loop: not require
			}
		}), WithBackend(b), WithLoops(2), WithLogger(testLogger(t)))
		require.NoError(t, err)
		require.Len(t, pl.Conns(), 1)

		c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "cli"), Net: "unixgram"})
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
		to := &net.UnixAddr{Name: path, Net: "unixgram"}
		buf := make([]byte, 65536)
		for _, n := range []int{0, 1, 512, 65000} {
			_, err := c.WriteToUnix(pattern(n, 5), to)
			require.NoError(t, err)
			k, _, err := c.ReadFromUnix(buf)
			require.NoError(t, err)
			require.Equal(t, pattern(n, 5), buf[:k], "echo of %d bytes", n)
		}
		require.Zero(t, wrongAddr.Load())
		pc := pl.Conns()[0]
		replied := make(chan error, 1)
		require.NoError(t, pc.Loop().Post(func() { replied <- pc.Reply([]byte("x")) }))
		require.ErrorIs(t, await(t, replied, "no answer from the loop"), ErrPacketAddr)

		// A dialled socket against a standard library server.
		srvPath := filepath.Join(dir, "std")
		std, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: srvPath, Net: "unixgram"})
		require.NoError(t, err)
		defer std.Close()
		require.NoError(t, std.SetDeadline(time.Now().Add(20*time.Second)))
		answers := make(chan string, 1)
		d, err := pl.Server().DialPacket("unixgram", srvPath, PacketHandlerFunc(func(pc *PacketConn, p []byte, from netip.AddrPort) {
			answers <- string(p)
		}))
		require.NoError(t, err)
		require.NoError(t, d.Loop().Post(func() {
			if err := d.Write([]byte("ping")); err != nil {
				t.Error(err)
			}
		}))
		k, from, err := std.ReadFromUnix(buf)
		require.NoError(t, err)
		require.Equal(t, "ping", string(buf[:k]))
		_, err = std.WriteToUnix([]byte("pong"), from)
		require.NoError(t, err)
		require.Equal(t, "pong", await(t, answers, "no answer on the dialled socket"))

		require.NoError(t, pl.Close())
		_, err = os.Stat(path)
		require.ErrorIs(t, err, os.ErrNotExist, "the socket file outlived the listener")
	})
}

// TestUDPPortTaken: a single-loop server refuses a UDP port another
// socket holds, as a multi-loop one does (no silent sharing).
func TestUDPPortTaken(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		first := startUDP(t, b, "127.0.0.1:0", udpEcho(), WithLoops(1))
		for _, loops := range []int{1, 2} {
			_, err := ListenPacket("udp", first.Addr().String(), udpEcho(), WithBackend(b), WithLoops(loops))
			require.ErrorIs(t, err, unix.EADDRINUSE, "%d loops", loops)
		}
		shared, err := ListenPacket("udp", first.Addr().String(), udpEcho(), WithBackend(b), WithLoops(2), WithPortSharing(true))
		if err == nil {
			shared.Close()
		}
		require.ErrorIs(t, err, unix.EADDRINUSE, "the first socket did not ask to share")
	})
}
