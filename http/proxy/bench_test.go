//go:build unix

package proxy

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/http/client"
	"github.com/veloq/veloq/http/internal/upstreamtest"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// fixedUpstream is a vnet server that answers every request head it
// reads with the same response of size body bytes (a head like nginx's),
// allocating nothing, so what a run allocates is the proxy's and the
// client's.
func fixedUpstream(tb testing.TB, be vnet.Backend, size int) string {
	tb.Helper()
	resp := []byte("HTTP/1.1 200 OK\r\nServer: fixed\r\nDate: Sat, 28 Nov 2026 14:10:09 GMT\r\n" +
		"Content-Type: text/plain\r\nContent-Length: " + strconv.Itoa(size) + "\r\n" +
		"Last-Modified: Sat, 28 Nov 2026 14:09:39 GMT\r\nConnection: keep-alive\r\n" +
		"ETag: \"6b0ae0a3-40\"\r\nAccept-Ranges: bytes\r\n\r\n")
	resp = append(resp, bytes.Repeat([]byte("x"), size)...)
	return upstreamtest.Fixed(tb, be, resp)
}

// chain sends its request again from OnResponseEnd until left are done,
// one in flight: a keep-alive client of the proxy on a loop of its own.
type chain struct {
	c    *client.Client
	l    *vnet.Loop
	req  client.Request
	left int
	got  int
	want int
	err  error
	done chan struct{}
}

func (ch *chain) OnResponseHead(call *client.Call, h *client.ResponseHead) {
	if h.Status != 200 && ch.err == nil {
		ch.err = fmt.Errorf("status %d", h.Status)
	}
}
func (ch *chain) OnResponseBody(call *client.Call, p []byte) { ch.got += len(p) }
func (ch *chain) OnResponseEnd(call *client.Call, trailer []client.Field, err error) {
	ch.left--
	if err == nil && ch.got != ch.want {
		err = fmt.Errorf("body of %d bytes, want %d", ch.got, ch.want)
	}
	ch.got = 0
	if err != nil && ch.err == nil {
		ch.err = err
	}
	if ch.err != nil || ch.left == 0 {
		close(ch.done)
		return
	}
	ch.c.Send(ch.l, &ch.req, ch)
}

// proxyBench is a proxy (one loop) in front of fixedUpstream, and a
// client on a loop of its own; run(n) sends n requests through the proxy
// one after another.
type proxyBench struct {
	c    *client.Client
	l    *vnet.Loop
	addr string
	size int
}

func newProxyBench(tb testing.TB, be vnet.Backend, size int) *proxyBench {
	tb.Helper()
	up := fixedUpstream(tb, be, size)
	l, err := vnet.NewLoop(0, vnet.Config{Backend: be})
	require.NoError(tb, err)
	tb.Cleanup(func() { l.Close() })
	pc, err := client.New(client.WithLoops([]*vnet.Loop{l}))
	require.NoError(tb, err)
	tb.Cleanup(func() { pc.Close() })
	p := newProxy(tb, WithUpstreams(up), WithClient(pc))
	cl, err := client.New(client.WithLoops([]*vnet.Loop{l}))
	require.NoError(tb, err)
	tb.Cleanup(func() { cl.Close() })
	return &proxyBench{c: cl, l: l, addr: serve(tb, be, p), size: size}
}

func (pb *proxyBench) run(tb testing.TB, n int) {
	ch := &chain{c: pb.c, l: pb.l, left: n, want: pb.size, done: make(chan struct{}),
		req: client.Request{Method: "GET", Addr: pb.addr, Target: "/", Header: []client.Field{
			{Name: []byte("User-Agent"), Value: []byte("veloq-bench")}, {Name: []byte("Accept"), Value: []byte("*/*")}}}}
	pb.l.Post(func() { pb.c.Send(pb.l, &ch.req, ch) })
	<-ch.done
	if ch.err != nil {
		tb.Fatal(ch.err)
	}
}

// BenchmarkProxy: keep-alive requests through the proxy, one at a time,
// with 64 B and 16 KiB bodies. allocs/op counts the proxy's server, the
// proxy, its client, the client in front and the upstream, each of which
// allocates nothing per request once warm: it must stay 0.
func BenchmarkProxy(b *testing.B) {
	for _, be := range backendtest.All[vnet.Backend]() {
		for _, size := range []int{64, 16 << 10} {
			b.Run(fmt.Sprintf("%s/%d", be, size), func(b *testing.B) {
				if err := be.Available(); err != nil {
					b.Skip(err)
				}
				pb := newProxyBench(b, be, size)
				pb.run(b, 200) // warm: connections, pools, buffers
				b.ReportAllocs()
				b.SetBytes(int64(size))
				b.ResetTimer()
				pb.run(b, b.N)
			})
		}
	}
}

// TestProxyAllocatesNothing: a proxied request allocates nothing once
// warm, on every backend: not the detached response, the exchange, the
// upstream call or the body parts.
// The portable backend is left out: it hands every read and write between
// goroutines as posted reports, which allocate.
func TestProxyAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random")
	}
	forEachBackend(t, func(t *testing.T, be vnet.Backend) {
		if be == vnet.BackendPortable {
			t.Skip("the portable backend allocates per read by design")
		}
		for _, size := range []int{64, 16 << 10} {
			pb := newProxyBench(t, be, size)
			pb.run(t, 200)
			// A run allocates its chain, channel and closure: a few
			// allocations for 300 requests.
			allocs := testing.AllocsPerRun(3, func() { pb.run(t, 300) })
			require.Less(t, allocs/300, 0.05, "allocations per request with %d B bodies", size)
		}
	})
}

// TestBodyForwardedInPlace: an HTTP/1 answer's body goes to the client
// intact, and on io_uring and epoll from the upstream's receive buffers
// themselves (ForwardTo in place, counted by Stats.InPlace), not copied
// into the client's output; the portable backend copies.
func TestBodyForwardedInPlace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be vnet.Backend) {
		const size = 256 << 10
		up := fixedUpstream(t, be, size)
		p := newProxy(t, WithUpstreams(up))
		s, err := vhttp.NewServer(p, vhttp.WithNetOptions(vnet.WithBackend(be), vnet.WithLoops(1)),
			vhttp.WithLogger(backendtest.Logger(t)))
		require.NoError(t, err)
		addr, err := s.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		for range 4 {
			code, body := get(t, httpClient(), "http://"+addr.String()+"/")
			require.Equal(t, 200, code)
			require.Equal(t, strings.Repeat("x", size), body)
		}
		inPlace := s.NetServer().Loops()[0].Stats().InPlace
		if be != vnet.BackendPortable {
			require.Greater(t, inPlace, uint64(4*size/2), "body bytes sent from receive buffers")
		} else {
			require.Zero(t, inPlace)
		}
	})
}
