//go:build unix

package net_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// forwardEcho is an echo server built on ForwardTo: every OnData forwards
// all input to the connection itself, then writes a '|' marker, so each
// received chunk goes out ahead of the marker written after it (on
// io_uring, large chunks from the receive buffer they arrived in).
func forwardEcho(t *testing.T, b vnet.Backend, opts ...vnet.Option) *vnet.Server {
	t.Helper()
	h := &vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
		n := c.Buffered()
		if got, err := c.ForwardTo(c, 0); err != nil || got != n {
			t.Errorf("ForwardTo = %d, %v; want %d, nil", got, err, n)
		}
		c.Write([]byte{'|'})
	}}
	opts = append([]vnet.Option{vnet.WithBackend(b), vnet.WithLoops(1), vnet.WithLogger(quietLogger(t))}, opts...)
	s, err := vnet.Listen("tcp", "127.0.0.1:0", h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, s) })
	return s
}

func letters(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	p := make([]byte, n)
	for i := range p {
		p[i] = 'a' + byte(r.IntN(26))
	}
	return p
}

func serverStats(s *vnet.Server) (inPlace uint64, held int64) {
	for _, st := range s.Stats() {
		inPlace += st.InPlace
		held += st.HeldBufs
	}
	return inPlace, held
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond, "timed out waiting for %s", what)
}

// Forwarded input arrives exactly and in order with the writes around it,
// over concurrent streams mixing large writes (sent in place on io_uring
// and epoll)
// and small ones (copied); when the streams end, every held receive
// buffer is back in the ring.
func TestForwardToKeepsOrder(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		s := forwardEcho(t, b)
		var wg sync.WaitGroup
		for i := range 6 {
			c := dialTCP(t, s.Addr().String())
			data := letters(uint64(i), 4<<20+i*1001)
			wg.Go(func() {
				werr := make(chan error, 1)
				go func() {
					var err error
					r := rand.New(rand.NewPCG(uint64(i), 2))
					for p := data; len(p) > 0 && err == nil; {
						n := min(len(p), 1+r.IntN(200<<10)) // 1 B to 200 KiB
						if r.IntN(4) == 0 {
							n = min(len(p), 1+r.IntN(100))
						}
						_, err = c.Write(p[:n])
						p = p[n:]
					}
					if err == nil {
						err = c.CloseWrite()
					}
					werr <- err
				}()
				got, err := io.ReadAll(c)
				if err != nil {
					t.Errorf("read: %v", err)
				}
				if err := <-werr; err != nil {
					t.Errorf("write: %v", err)
				}
				marks := bytes.Count(got, []byte{'|'})
				got = bytes.ReplaceAll(got, []byte{'|'}, nil)
				if !bytes.Equal(got, data) {
					t.Errorf("stream %d: got %d bytes, want %d, first difference at %d", i, len(got), len(data), firstDiff(got, data))
				}
				if marks == 0 {
					t.Errorf("stream %d: no marker came back", i)
				}
			})
		}
		wg.Wait()
		inPlace, _ := serverStats(s)
		if b != vnet.BackendPortable && inPlace == 0 {
			t.Errorf("%s: no byte was sent from a receive buffer", b)
		}
		if b == vnet.BackendPortable && inPlace != 0 {
			t.Errorf("portable: %d bytes counted as sent in place; it copies", inPlace)
		}
		waitFor(t, "held buffers to return", func() bool { _, h := serverStats(s); return h == 0 })
	})
}

// Peers that send without reading leave buffers held on their
// connections, within the loop's bound (half its receive buffers), and
// all of them are recycled when the peers reset. The loop's ring then
// serves a new connection as before.
func TestForwardToReleasesHeldBuffers(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		const ringBufs = 16
		s := forwardEcho(t, b, vnet.WithLoopConfig(vnet.Config{Backend: b, Logger: quietLogger(t),
			RecvBuffers: ringBufs, RecvBufferSize: 16 << 10}))
		const conns = 8
		var wg sync.WaitGroup
		var cs []*net.TCPConn
		load := bytes.Repeat([]byte("abcdefgh"), 4<<20) // 32 MiB
		for range conns {
			c := dialTCP(t, s.Addr().String())
			c.SetReadBuffer(4 << 10)
			cs = append(cs, c)
			// The write blocks once the server's output and both kernels'
			// buffers are full; the reset below ends it.
			wg.Go(func() { c.Write(load) })
		}
		waitFor(t, "all connections open", func() bool { return s.NumConns() == conns })
		var most int64
		for range 100 {
			_, h := serverStats(s)
			most = max(most, h)
			time.Sleep(2 * time.Millisecond)
		}
		if most > ringBufs/2 {
			t.Errorf("%d receive buffers held at once; want at most %d (half the ring)", most, ringBufs/2)
		}
		if inPlace, _ := serverStats(s); b != vnet.BackendPortable && inPlace == 0 {
			t.Errorf("%s: no byte was sent from a receive buffer: %+v", b, s.Stats())
		}
		for _, c := range cs {
			c.SetLinger(0)
			c.Close()
		}
		wg.Wait()
		waitFor(t, "connections to close", func() bool { return s.NumConns() == 0 })
		if _, h := serverStats(s); h != 0 {
			t.Errorf("%d receive buffers still held after every connection closed", h)
		}
		c := dialTCP(t, s.Addr().String())
		data := letters(99, 2<<20)
		go func() {
			c.Write(data)
			c.CloseWrite()
		}()
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if got = bytes.ReplaceAll(got, []byte{'|'}, nil); !bytes.Equal(got, data) {
			t.Errorf("after the resets: got %d bytes, want %d, first difference at %d", len(got), len(data), firstDiff(got, data))
		}
	})
}

// A small chunk forwarded into an empty output queue, as a relay of
// request/response messages does, is sent from its receive buffer on
// io_uring (no copy: the send would be its own anyway) and arrives intact
// ahead of the write behind it; the buffer returns to the ring after the
// send. The other backends copy (epoll lends its read buffer only for
// chunks of 4 KiB and more).
func TestForwardToSmallChunkInPlace(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		s := forwardEcho(t, b)
		c := dialTCP(t, s.Addr().String())
		const msgs, size = 20, 64
		for i := range msgs {
			msg := letters(uint64(i), size)
			if _, err := c.Write(msg); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
			got := make([]byte, size+1)
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
			if want := append(msg, '|'); !bytes.Equal(got, want) {
				t.Fatalf("message %d: got %q, want %q", i, got, want)
			}
		}
		inPlace, _ := serverStats(s)
		if b == vnet.BackendUring && inPlace < msgs*size/2 {
			t.Errorf("io_uring: %d bytes sent from receive buffers; want most of the %d forwarded", inPlace, msgs*size)
		}
		if b != vnet.BackendUring && inPlace != 0 {
			t.Errorf("%s: %d bytes counted as sent in place; it copies", b, inPlace)
		}
		waitFor(t, "held buffers to return", func() bool { _, h := serverStats(s); return h == 0 })
	})
}
