package http

import (
	"bytes"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/veloq/veloq/http/internal/h2"
	vnet "github.com/veloq/veloq/net"
)

// BenchmarkServerH2 measures the HTTP/2 request path end to end over a
// loopback h2c connection: a client opens depth streams at once, each a
// GET / answered inline ("Hello, World!"), and reads every answer. One op
// is depth requests; allocs/op counts both sides (the client allocates
// nothing per op).
func BenchmarkServerH2(b *testing.B) {
	for _, be := range []vnet.Backend{vnet.BackendEpoll, vnet.BackendUring} {
		for _, depth := range []int{1, 16} {
			b.Run(string(be)+"/depth="+itoa(depth), func(b *testing.B) {
				if be == vnet.BackendUring && vnet.ProbeUring() != nil {
					b.Skip("io_uring unavailable")
				}
				benchH2(b, be, depth)
			})
		}
	}
}

func benchH2(b *testing.B, be vnet.Backend, depth int) {
	s := startServer(b, be, HandlerFunc(testHandler), WithNetOptions(vnet.WithLoops(1)))
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	// The request's block refers to no dynamic entry, so the same bytes
	// serve every stream.
	var eb bytes.Buffer
	enc := hpack.NewEncoder(&eb)
	enc.SetMaxDynamicTableSizeLimit(0)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "x"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	block := eb.Bytes()
	if _, err := c.Write(append([]byte(h2.ClientPreface), h2.AppendSettings(nil)...)); err != nil {
		b.Fatal(err)
	}
	out := make([]byte, 0, 64<<10)
	in := make([]byte, 256<<10)
	have := 0
	id := uint32(1)
	taken := 0 // DATA received, given back with the next requests
	// round sends depth requests and reads until depth streams ended.
	round := func() {
		out = out[:0]
		if taken > 0 {
			out = h2.AppendWindowUpdate(out, 0, uint32(taken))
			taken = 0
		}
		for i := 0; i < depth; i++ {
			out = h2.AppendHeaders(out, id, true, block, h2.MinMaxFrameSize)
			id += 2
		}
		if _, err := c.Write(out); err != nil {
			b.Fatal(err)
		}
		ended := 0
		for ended < depth {
			h, _, n, err := h2.Next(in[:have], h2.MaxMaxFrameSize)
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				k, err := c.Read(in[have:])
				if err != nil {
					b.Fatal(err)
				}
				have += k
				continue
			}
			if h.Type == h2.TypeGoAway || h.Type == h2.TypeRSTStream {
				b.Fatalf("%s from the server", h.Type)
			}
			if h.Type == h2.TypeData {
				taken += int(h.Length)
			}
			if (h.Type == h2.TypeData || h.Type == h2.TypeHeaders) && h.Flags.Has(h2.FlagEndStream) {
				ended++
			}
			copy(in, in[n:have])
			have -= n
		}
	}
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	round() // SETTINGS and the first answers
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round()
	}
}
