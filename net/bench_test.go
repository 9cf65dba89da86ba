package net

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
)

// BenchmarkEcho64 measures one 64-byte round trip through the server per
// op over 127.0.0.1. allocs/op counts the whole process (server loop and
// the standard-library client), so 0 means the loop allocates nothing per
// echoed message in steady state.
func BenchmarkEcho64(b *testing.B) {
	benchEcho64(b, nil, func(c net.Conn) net.Conn { return c })
}

// benchEcho64 runs the 64-byte echo on each backend against a server
// started with opts, through the client connection wrap makes.
func benchEcho64(b *testing.B, opts []Option, wrap func(net.Conn) net.Conn) {
	for _, be := range backends {
		b.Run(string(be), func(b *testing.B) {
			if be == BackendUring && ProbeUring() != nil {
				b.Skip("io_uring unavailable")
			}
			s, err := Listen("tcp", "127.0.0.1:0", echoHandler(), append([]Option{WithBackend(be), WithLoops(1)}, opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			raw, err := net.Dial("tcp", s.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close()
			c := wrap(raw)
			msg := make([]byte, 64)
			buf := make([]byte, 64)
			for i := 0; i < 1000; i++ { // warm the pools
				c.Write(msg)
				io.ReadFull(c, buf)
			}
			b.ReportAllocs()
			b.SetBytes(64)
			for b.Loop() {
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

// BenchmarkTLSHandshake measures one full TLS 1.3 handshake (ECDSA P-256,
// X25519, no resumption) and a 1-byte echo per op over 127.0.0.1, with
// the handshake on the loop and on a goroutine. The figures cover both
// ends (the client runs in this process too); a memory profile
// (-memprofile, then pprof -focus net) shows the server's share.
func BenchmarkTLSHandshake(b *testing.B) {
	client := testCert().ClientConfig("localhost")
	client.CurvePreferences = []tls.CurveID{tls.X25519}
	client.ClientSessionCache = nil
	for _, off := range []bool{false, true} {
		name := "on-loop"
		if off {
			name = "off-loop"
		}
		b.Run(name, func(b *testing.B) {
			s, err := Listen("tcp", "127.0.0.1:0", echoHandler(), WithLoops(1),
				WithTLS(testCert().ServerConfig()), WithTLSHandshakeOffLoop(off))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			buf := make([]byte, 1)
			b.ReportAllocs()
			for b.Loop() {
				raw, err := net.Dial("tcp", s.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				c := tls.Client(raw, client)
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
				raw.Close()
			}
		})
	}
}

// BenchmarkTLSEcho64 is BenchmarkEcho64 over TLS 1.3 (AES-128-GCM): one
// 64-byte round trip per op. allocs/op counts both ends (the client is
// crypto/tls in this process); a memory profile shows the loop's share.
func BenchmarkTLSEcho64(b *testing.B) {
	cfg := testCert().ClientConfig("localhost")
	cfg.CipherSuites = []uint16{tls.TLS_AES_128_GCM_SHA256}
	benchEcho64(b, []Option{WithTLS(testCert().ServerConfig())},
		func(c net.Conn) net.Conn { return tls.Client(c, cfg) })
}
