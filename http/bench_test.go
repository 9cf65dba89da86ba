package http

import (
	"strings"
	"testing"
	"time"

	"github.com/veloq/veloq/http/internal/h1"
)

func BenchmarkParse(b *testing.B) {
	// Each input is parsed whole, request after request.
	for _, bc := range []struct{ name, in string }{
		{"chrome-GET", chromeRequest},
		{"minimal-GET", "GET / HTTP/1.1\r\nHost: localhost:8080\r\n\r\n"},
		{"pipelined-16", strings.Repeat("GET /plaintext HTTP/1.1\r\nHost: server\r\nAccept: text/plain\r\nConnection: keep-alive\r\n\r\n", 16)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			buf := []byte(bc.in)
			var p parser
			var req Request
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				for in := buf; len(in) > 0; {
					n, err := p.Parse(in, &req)
					if err != nil {
						b.Fatal(err)
					}
					in = in[n:]
				}
			}
		})
	}
	b.Run("chrome-GET-2-reads", func(b *testing.B) {
		// The head arrives in two reads: the parser resumes.
		buf := []byte(chromeRequest)
		half := buf[:len(buf)/2]
		var p parser
		var req Request
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			p.Parse(half, &req)
			if _, err := p.Parse(buf, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkRequestHeader(b *testing.B) {
	var p parser
	var req Request
	if _, err := p.Parse([]byte(chromeRequest), &req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if req.Header("accept-language") == nil {
			b.Fatal("missing")
		}
	}
}

func BenchmarkResponse(b *testing.B) {
	var p parser
	var req Request
	if _, err := p.Parse([]byte(chromeRequest), &req); err != nil {
		b.Fatal(err)
	}
	var r response
	var dc h1.DateCache
	body := make([]byte, 0, 64)
	out := make([]byte, 0, 512)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(body)
		r.Header().Set("Content-Type", "text/plain; charset=utf-8")
		r.WriteString("Hello, World!")
		out = r.AppendTo(out[:0], &req, dc.Bytes(now))
	}
}
