//go:build unix

package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/http/client"
	"github.com/veloq/veloq/internal/backendtest"
	"github.com/veloq/veloq/internal/selfsigned"
	vnet "github.com/veloq/veloq/net"
	"github.com/veloq/veloq/websocket"
)

// upgradeUpstream serves one Upgrade per connection by hand: it reads the
// request, hands it to check, writes the 101 with early (bytes sent in
// the same write as the head), then echoes everything until the client's
// FIN, which it passes back. Small socket buffers keep what the kernel
// absorbs small, so that a relay that did not pace itself would show.
func upgradeUpstream(t *testing.T, early string, check func(r *nethttp.Request)) string {
	return upgradeUpstreamThen(t, early, check, func(c *net.TCPConn, br *bufio.Reader) {
		if _, err := io.Copy(c, br); err == nil {
			c.CloseWrite()
			io.Copy(io.Discard, c)
		}
	})
}

// upgradeUpstreamThen is upgradeUpstream with then serving the
// connection after the 101.
func upgradeUpstreamThen(t *testing.T, early string, check func(r *nethttp.Request), then func(c *net.TCPConn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return upgradeUpstreamOn(t, ln, early, check, func(c net.Conn, br *bufio.Reader) { then(c.(*net.TCPConn), br) })
}

// upgradeUpstreamOn is upgradeUpstreamThen on ln (a TLS one, say).
func upgradeUpstreamOn(t *testing.T, ln net.Listener, early string, check func(r *nethttp.Request), then func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if tc, ok := c.(*net.TCPConn); ok {
					tc.SetReadBuffer(64 << 10)
					tc.SetWriteBuffer(64 << 10)
				}
				br := bufio.NewReader(c)
				r, err := nethttp.ReadRequest(br)
				if err != nil {
					return
				}
				if check != nil {
					check(r)
				}
				fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\nX-Up: 1\r\n\r\n%s", r.Header.Get("Upgrade"), early)
				then(c, br)
			}()
		}
	}()
	return ln.Addr().String()
}

// dialUpgrade sends an upgrade request to the proxy at addr, with extra
// bytes in the same write, and returns the connection and a reader
// positioned after the 101's head, which it checks.
func dialUpgrade(t *testing.T, addr, proto, extra string) (*net.TCPConn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	tc := c.(*net.TCPConn)
	tc.SetReadBuffer(64 << 10)
	tc.SetWriteBuffer(64 << 10)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	_, err = fmt.Fprintf(c, "GET /tunnel HTTP/1.1\r\nHost: example\r\nConnection: keep-alive, Upgrade\r\nUpgrade: %s\r\n\r\n%s", proto, extra)
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := nethttp.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, 101, resp.StatusCode)
	require.Equal(t, proto, resp.Header.Get("Upgrade"))
	require.True(t, strings.EqualFold(resp.Header.Get("Connection"), "upgrade"), "Connection: %q", resp.Header.Values("Connection"))
	require.Equal(t, "1", resp.Header.Get("X-Up"), "end-to-end fields of the 101 pass")
	return tc, br
}

// An Upgrade goes through with Connection and Upgrade kept; after the
// 101 the bytes that came with the request and with the 101 arrive, the
// tunnel echoes both ways, and the client's half-close reaches the
// upstream, whose own FIN comes back after the last byte.
func TestUpgradeTunnel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		got := make(chan nethttp.Header, 1)
		up := upgradeUpstream(t, "early-from-upstream;", func(r *nethttp.Request) { got <- r.Header })
		p := newProxy(t, WithUpstreams(up))
		addr := serve(t, b, p)

		c, br := dialUpgrade(t, addr, "x-test/1", "early-from-client;")
		h := <-got
		require.Equal(t, "x-test/1", h.Get("Upgrade"))
		require.Equal(t, "Upgrade", h.Get("Connection"), "only the upgrade is listed; keep-alive is hop-by-hop")

		// Both early parts arrive with nothing more sent: none waits for
		// another read.
		first := make([]byte, len("early-from-upstream;early-from-client;"))
		_, err := io.ReadFull(br, first)
		require.NoError(t, err)
		require.Equal(t, "early-from-upstream;early-from-client;", string(first))
		_, err = c.Write([]byte("second;"))
		require.NoError(t, err)
		require.NoError(t, c.CloseWrite())
		rest, err := io.ReadAll(br)
		require.NoError(t, err, "the upstream's FIN comes back as a clean EOF")
		require.Equal(t, "second;", string(rest))
		require.Eventually(t, func() bool { return p.Stats().Tunnels == 0 }, 10*time.Second, 5*time.Millisecond)
		require.Equal(t, uint64(1), p.Stats().Upgrades)
	})
}

// A reset on either side of a tunnel reaches the other as a reset, never
// as a clean end that would pass a broken stream for a complete one.
func TestUpgradeTunnelReset(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		// The upstream resets after its first read.
		up := upgradeUpstreamThen(t, "", nil, func(c *net.TCPConn, br *bufio.Reader) {
			br.ReadByte()
			c.SetLinger(0)
			c.Close()
		})
		p := newProxy(t, WithUpstreams(up))
		addr := serve(t, b, p)
		c, br := dialUpgrade(t, addr, "x", "")
		_, err := c.Write([]byte("x"))
		require.NoError(t, err)
		_, err = io.ReadAll(br)
		require.ErrorIs(t, err, syscall.ECONNRESET, "the upstream's reset comes through as a reset")
		require.Eventually(t, func() bool { return p.Stats().Tunnels == 0 }, 10*time.Second, 5*time.Millisecond)

		// The client resets: the upstream sees a reset too.
		got := make(chan error, 1)
		up = upgradeUpstreamThen(t, "", nil, func(c *net.TCPConn, br *bufio.Reader) {
			_, err := io.Copy(io.Discard, br)
			got <- err
		})
		p = newProxy(t, WithUpstreams(up))
		addr = serve(t, b, p)
		c, _ = dialUpgrade(t, addr, "x", "some bytes")
		require.Eventually(t, func() bool { return p.Stats().Tunnels == 1 }, 10*time.Second, 5*time.Millisecond)
		c.SetLinger(0)
		c.Close()
		select {
		case err := <-got:
			require.ErrorIs(t, err, syscall.ECONNRESET)
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream never saw the client's reset")
		}
		require.Eventually(t, func() bool { return p.Stats().Tunnels == 0 }, 10*time.Second, 5*time.Millisecond)
	})
}

// Server.Close cuts open tunnels, both sides: no connection is left.
func TestUpgradeTunnelServerClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		got := make(chan error, 1)
		up := upgradeUpstreamThen(t, "", nil, func(c *net.TCPConn, br *bufio.Reader) {
			_, err := io.Copy(io.Discard, br)
			got <- err
		})
		p := newProxy(t, WithUpstreams(up))
		s, err := vhttp.NewServer(p, vhttp.WithNetOptions(vnet.WithBackend(b), vnet.WithLoops(1)))
		require.NoError(t, err)
		a, err := s.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		c, br := dialUpgrade(t, a.String(), "x", "")
		require.Eventually(t, func() bool { return p.Stats().Tunnels == 1 }, 10*time.Second, 5*time.Millisecond)
		require.NoError(t, s.Close())
		io.ReadAll(br) // the server closes the client's side: its read ends
		c.Close()
		select {
		case <-got: // closed or reset, as the server's close reached it first or the tunnel did
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream side of the tunnel outlived the server")
		}
		require.Eventually(t, func() bool { return p.Stats().Tunnels == 0 }, 10*time.Second, 5*time.Millisecond)
	})
}

// TLS on both sides: an HTTP/1.1 client over TLS upgrades through the
// proxy to an https:// upstream; the tunnel relays the plaintext, the
// bytes sent with the request included.
func TestUpgradeTLS(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		cert := selfsigned.Shared()
		ln, err := tls.Listen("tcp", "127.0.0.1:0", cert.ServerConfig())
		require.NoError(t, err)
		up := upgradeUpstreamOn(t, ln, "hi;", nil, func(c net.Conn, br *bufio.Reader) { io.Copy(c, br) })
		_, port, _ := net.SplitHostPort(up)
		cl, err := client.New(client.WithNumLoops(1), client.WithTLSConfig(cert.ClientConfig("127.0.0.1")))
		require.NoError(t, err)
		t.Cleanup(func() { cl.Close() })
		p := newProxy(t, WithUpstreams("https://127.0.0.1:"+port), WithClient(cl))
		addr := serve(t, b, p, vhttp.WithTLS(cert.ServerConfig()))

		cfg := cert.ClientConfig("127.0.0.1")
		cfg.NextProtos = []string{"http/1.1"}
		c, err := tls.Dial("tcp", addr, cfg)
		require.NoError(t, err)
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\nearly;")
		require.NoError(t, err)
		br := bufio.NewReader(c)
		resp, err := nethttp.ReadResponse(br, nil)
		require.NoError(t, err)
		require.Equal(t, 101, resp.StatusCode)
		got := make([]byte, len("hi;early;"))
		_, err = io.ReadFull(br, got)
		require.NoError(t, err)
		require.Equal(t, "hi;early;", string(got))
		big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
		go c.Write(big)
		back := make([]byte, len(big))
		_, err = io.ReadFull(br, back)
		require.NoError(t, err)
		require.True(t, bytes.Equal(big, back))
		c.Close()
		require.Eventually(t, func() bool { return p.Stats().Tunnels == 0 }, 10*time.Second, 5*time.Millisecond)
	})
}

// An upstream that refuses the upgrade answers as to any request: its
// answer is forwarded, and the client's connection goes on with HTTP.
func TestUpgradeRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := rawUpstream(t, func(r *nethttp.Request) ([]byte, bool) {
			if r.Header.Get("Upgrade") != "" {
				return []byte("HTTP/1.1 426 Upgrade Required\r\nContent-Length: 3\r\n\r\nno\n"), false
			}
			return []byte("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n"), false
		})
		p := newProxy(t, WithUpstreams(up))
		addr := serve(t, b, p)
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		resp, err := nethttp.ReadResponse(br, nil)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, 426, resp.StatusCode)
		require.Equal(t, "no\n", string(body))
		fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err = nethttp.ReadResponse(br, nil)
		require.NoError(t, err)
		body, _ = io.ReadAll(resp.Body)
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "ok\n", string(body))
		require.Zero(t, p.Stats().Upgrades)
	})
}

// 64 MiB each way through a tunnel whose client stops reading: the
// client's writes stall well before all of it is in (the tunnel pauses
// the side that feeds a full one; the kernel buffers are what is left),
// no more than the buffer limit ever waits toward one side, and once the
// client reads, every byte arrives.
func TestUpgradeTunnelSlowReader(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := upgradeUpstream(t, "", nil)
		const limit = 64 << 10
		p := newProxy(t, WithUpstreams(up), WithMaxBuffered(limit))
		addr := serve(t, b, p)
		c, br := dialUpgrade(t, addr, "bulk", "")

		const total = 64 << 20
		chunk := make([]byte, 256<<10)
		var sent int64
		writeErr := make(chan error, 1)
		stalled := make(chan struct{})
		resume := make(chan struct{})
		go func() {
			once := false
			for sent < total {
				binary.BigEndian.PutUint64(chunk, uint64(sent))
				if !once {
					c.SetWriteDeadline(time.Now().Add(time.Second))
				}
				n, err := c.Write(chunk)
				sent += int64(n)
				if err != nil {
					if !once && errors.Is(err, os.ErrDeadlineExceeded) {
						once = true
						close(stalled)
						<-resume
						c.SetWriteDeadline(time.Now().Add(30 * time.Second))
						// Finish the chunk the deadline cut.
						if _, err := c.Write(chunk[n:]); err != nil {
							writeErr <- err
							return
						}
						sent += int64(len(chunk) - n)
						continue
					}
					writeErr <- err
					return
				}
			}
			writeErr <- c.CloseWrite()
		}()
		select {
		case <-stalled:
		case err := <-writeErr:
			t.Fatalf("all %d bytes went in with nobody reading (err %v): the tunnel buffers without bound", total, err)
		}
		t.Logf("the writer stalled after %d bytes", sent)
		require.Less(t, sent, int64(40<<20), "the writer stalled only after %d bytes", sent)
		require.LessOrEqual(t, p.tunnelPeak.Load(), int64(limit))
		close(resume)

		got, err := io.Copy(io.Discard, br)
		require.NoError(t, err)
		require.NoError(t, <-writeErr)
		require.Equal(t, int64(total), got)
		require.LessOrEqual(t, p.tunnelPeak.Load(), int64(limit))
		require.Positive(t, p.tunnelPeak.Load(), "the tunnel never paused")
	})
}

// veloq's own WebSocket server as the upstream, spoken to with raw RFC
// 6455 frames through the proxy: the handshake's fields pass both ways
// (Sec-WebSocket-Accept is the upstream's answer to the client's key), a
// frame sent with the handshake is not lost, and messages echo.
func TestUpgradeWebSocket(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		u := websocket.NewUpgrader()
		echo := &websocket.HandlerFuncs{Message: func(c *websocket.Conn, typ websocket.MessageType, data []byte) {
			c.WriteMessage(typ, data)
		}}
		up := serve(t, b, vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
			u.Upgrade(w, r, echo)
		}))
		p := newProxy(t, WithUpstreams(up))
		addr := serve(t, b, p)

		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		key := "dGhlIHNhbXBsZSBub25jZQ=="
		req := "GET /ws HTTP/1.1\r\nHost: example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + "\r\n\r\n"
		_, err = c.Write(append([]byte(req), clientFrame(1, []byte("with the handshake"))...))
		require.NoError(t, err)
		br := bufio.NewReader(c)
		resp, err := nethttp.ReadResponse(br, nil)
		require.NoError(t, err)
		require.Equal(t, 101, resp.StatusCode)
		require.Equal(t, websocket.AcceptKey(key), resp.Header.Get("Sec-WebSocket-Accept"))
		require.Equal(t, "with the handshake", readFrame(t, br))
		for i := range 5 {
			msg := strings.Repeat(fmt.Sprint(i), 1000*i+1)
			_, err := c.Write(clientFrame(1, []byte(msg)))
			require.NoError(t, err)
			require.Equal(t, msg, readFrame(t, br))
		}
		// A close frame: the upstream answers it and closes; the tunnel
		// passes both on.
		_, err = c.Write(clientFrame(8, []byte{0x03, 0xe8}))
		require.NoError(t, err)
		hdr := make([]byte, 2)
		_, err = io.ReadFull(br, hdr)
		require.NoError(t, err)
		require.Equal(t, byte(0x88), hdr[0])
		// The upstream half-closed after its close frame; ours ends the
		// tunnel.
		require.NoError(t, c.(*net.TCPConn).CloseWrite())
		_, err = io.ReadAll(br)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return p.Stats().Tunnels == 0 }, 10*time.Second, 5*time.Millisecond)
	})
}

// clientFrame is a final masked frame with opcode op.
func clientFrame(op byte, payload []byte) []byte {
	f := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		f = append(f, 0x80|byte(n))
	case n < 1<<16:
		f = append(f, 0x80|126, byte(n>>8), byte(n))
	default:
		f = append(f, 0x80|127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	mask := [4]byte{1, 2, 3, 4}
	f = append(f, mask[:]...)
	for i, c := range payload {
		f = append(f, c^mask[i%4])
	}
	return f
}

// readFrame reads one unmasked server frame and returns its payload.
func readFrame(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	hdr := make([]byte, 2)
	_, err := io.ReadFull(br, hdr)
	require.NoError(t, err)
	n := int(hdr[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		_, err = io.ReadFull(br, b[:])
		n = int(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		_, err = io.ReadFull(br, b[:])
		n = int(binary.BigEndian.Uint64(b[:]))
	}
	require.NoError(t, err)
	p := make([]byte, n)
	_, err = io.ReadFull(br, p)
	require.NoError(t, err)
	return string(bytes.Clone(p))
}

// BenchmarkUpgradeTunnel echoes 64 KiB at a time through a tunnel to a
// veloq echo upstream (a hijacked connection), one loop each, on each
// backend: the relay's cost per byte, both directions.
func BenchmarkUpgradeTunnel(b *testing.B) {
	for i, be := range backendtest.All[vnet.Backend]() {
		b.Run(backendtest.Names[i], func(b *testing.B) {
			up := serve(b, be, vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
				w.WriteHeader(vhttp.StatusSwitchingProtocols)
				w.Header().Set("Upgrade", "echo")
				w.Header().Set("Connection", "Upgrade")
				w.Hijack(&vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
					in, _ := c.Next(-1)
					c.Write(in)
				}})
			}))
			p := newProxy(b, WithUpstreams(up))
			addr := serve(b, be, p)
			c, err := net.Dial("tcp", addr)
			require.NoError(b, err)
			defer c.Close()
			_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			require.NoError(b, err)
			br := bufio.NewReader(c)
			resp, err := nethttp.ReadResponse(br, nil)
			require.NoError(b, err)
			require.Equal(b, 101, resp.StatusCode)
			msg := make([]byte, 64<<10)
			back := make([]byte, len(msg))
			b.SetBytes(int64(len(msg)))
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(br, back); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
