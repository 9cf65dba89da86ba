package net

import (
	"io"
	"net"
	"testing"
)

// BenchmarkEcho64 measures one 64-byte round trip through the server per
// op over 127.0.0.1. allocs/op counts the whole process (server loop and
// the standard-library client), so 0 means the loop allocates nothing per
// echoed message in steady state.
func BenchmarkEcho64(b *testing.B) {
	for _, be := range backends {
		b.Run(string(be), func(b *testing.B) {
			if be == BackendUring && ProbeUring() != nil {
				b.Skip("io_uring unavailable")
			}
			s, err := Listen("tcp", "127.0.0.1:0", echoHandler(), WithBackend(be), WithLoops(1))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			c, err := net.Dial("tcp", s.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			msg := make([]byte, 64)
			buf := make([]byte, 64)
			for i := 0; i < 1000; i++ { // warm the pools
				c.Write(msg)
				io.ReadFull(c, buf)
			}
			b.ReportAllocs()
			b.SetBytes(64)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
