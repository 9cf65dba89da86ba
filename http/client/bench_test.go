package client

import (
	"testing"

	"github.com/veloq/veloq/http/internal/h2"
	"github.com/veloq/veloq/http/internal/upstreamtest"
	vnet "github.com/veloq/veloq/net"
)

// fixedUpstream is a vnet server that answers every request head it reads
// with the same small response, allocating nothing: the benchmark's
// allocations are then the client's.
func fixedUpstream(b *testing.B, be vnet.Backend) string {
	return upstreamtest.Fixed(b, be, []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!"))
}

// chain sends its request again from OnResponseEnd until n are done: the
// on-loop path a proxy takes, one request in flight.
type chain struct {
	c    *Client
	l    *vnet.Loop
	req  Request
	left int
	err  error
	done chan struct{}
}

func (ch *chain) OnResponseHead(call *Call, h *ResponseHead) {}
func (ch *chain) OnResponseBody(call *Call, p []byte)        {}
func (ch *chain) OnResponseEnd(call *Call, trailer []Field, err error) {
	ch.left--
	if err != nil || ch.left == 0 {
		ch.err = err
		close(ch.done)
		return
	}
	ch.c.Send(ch.l, &ch.req, ch)
}

// BenchmarkSendOnLoop: request/response on the loop against a local
// upstream, one connection kept alive. allocs/op is the client's per
// request cost at steady state.
func BenchmarkSendOnLoop(b *testing.B) {
	for _, be := range []vnet.Backend{vnet.BackendUring, vnet.BackendEpoll} {
		b.Run(string(be), func(b *testing.B) {
			if err := be.Available(); err != nil {
				b.Skip(err)
			}
			addr := fixedUpstream(b, be)
			l, err := vnet.NewLoop(0, vnet.Config{Backend: be})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
			c, err := New(WithLoops([]*vnet.Loop{l}))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			run := func(n int) {
				ch := &chain{c: c, l: l, left: n, done: make(chan struct{}),
					req: Request{Method: "GET", Addr: addr, Target: "/", Header: []Field{
						{[]byte("User-Agent"), []byte("veloq-bench")}, {[]byte("Accept"), []byte("*/*")}}}}
				l.Post(func() { c.Send(l, &ch.req, ch) })
				<-ch.done
				if ch.err != nil {
					b.Fatal(ch.err)
				}
			}
			run(100) // warm: the connection, the call pool, the buffers
			b.ReportAllocs()
			b.ResetTimer()
			run(b.N)
			b.StopTimer()
			s := c.Stats()
			b.ReportMetric(float64(s.NewConns), "conns")
		})
	}
}

// fixedH2Upstream is a vnet server speaking just enough HTTP/2 (prior
// knowledge) to answer every request stream with the same small response
// from precomputed frames, allocating nothing.
func fixedH2Upstream(b *testing.B, be vnet.Backend) string {
	hello := []byte("Hello, World!")
	settings := h2.AppendSettings(nil)
	h := &vnet.HandlerFuncs{Open: func(c *vnet.Conn) { c.Write(settings) }, Data: func(c *vnet.Conn) {
		in, _ := c.Peek(0)
		if c.Value() == nil {
			if len(in) < len(h2.ClientPreface) {
				return
			}
			c.Discard(len(h2.ClientPreface))
			c.SetValue(true)
			in = in[len(h2.ClientPreface):]
		}
		out := c.AvailableBuffer()
		for {
			hd, _, n, err := h2.Next(in, h2.MaxMaxFrameSize)
			if err != nil || n == 0 {
				break
			}
			in = in[n:]
			c.Discard(n)
			if hd.Type == h2.TypeHeaders && hd.Flags.Has(h2.FlagEndStream) {
				// 0x88: :status 200 from HPACK's static table.
				out = h2.AppendHeaders(out, hd.Stream, false, []byte{0x88}, h2.MinMaxFrameSize)
				out = h2.AppendData(out, hd.Stream, true, hello)
			}
		}
		if len(out) > 0 {
			c.Write(out)
		}
	}}
	s, err := vnet.Listen("tcp", "127.0.0.1:0", h, vnet.WithBackend(be), vnet.WithLoops(1))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s.Addr().String()
}

// BenchmarkSendOnLoopH2: BenchmarkSendOnLoop over HTTP/2 (h2c), one
// stream at a time on one connection.
func BenchmarkSendOnLoopH2(b *testing.B) {
	for _, be := range []vnet.Backend{vnet.BackendUring, vnet.BackendEpoll} {
		b.Run(string(be), func(b *testing.B) {
			if err := be.Available(); err != nil {
				b.Skip(err)
			}
			addr := fixedH2Upstream(b, be)
			l, err := vnet.NewLoop(0, vnet.Config{Backend: be})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
			c, err := New(WithLoops([]*vnet.Loop{l}))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			run := func(n int) {
				ch := &chain{c: c, l: l, left: n, done: make(chan struct{}),
					req: Request{Method: "GET", Addr: addr, Target: "/", Proto: ProtoHTTP2, Header: []Field{
						{[]byte("User-Agent"), []byte("veloq-bench")}, {[]byte("Accept"), []byte("*/*")}}}}
				l.Post(func() { c.Send(l, &ch.req, ch) })
				<-ch.done
				if ch.err != nil {
					b.Fatal(ch.err)
				}
			}
			run(100)
			b.ReportAllocs()
			b.ResetTimer()
			run(b.N)
			b.StopTimer()
			b.ReportMetric(float64(c.Stats().NewConns), "conns")
		})
	}
}
