package h1

import (
	"strings"
	"testing"
)

func BenchmarkChunkedDecode(b *testing.B) {
	chunk := strings.Repeat("x", 1024)
	var enc []byte
	for range 64 {
		enc = AppendChunk(enc, []byte(chunk))
	}
	enc = AppendLastChunk(enc)
	b.Run("Next-64x1KiB", func(b *testing.B) {
		var d ChunkedDecoder
		b.SetBytes(int64(len(enc)))
		b.ReportAllocs()
		for b.Loop() {
			d.Reset()
			for in := enc; ; {
				n, _, done, err := d.Next(in)
				if done {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				in = in[n:]
			}
		}
	})
	b.Run("Decode-64x1KiB", func(b *testing.B) {
		var d ChunkedDecoder
		out := make([]byte, len(enc))
		b.SetBytes(int64(len(enc)))
		b.ReportAllocs()
		for b.Loop() {
			d.Reset()
			if _, _, done, err := d.Decode(enc, out); !done || err != nil {
				b.Fatal(done, err)
			}
		}
	})
	small := []byte("5\r\nhello\r\n1;ext=\"v\"\r\n,\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n")
	b.Run("Decode-small", func(b *testing.B) {
		var d ChunkedDecoder
		out := make([]byte, len(small))
		b.SetBytes(int64(len(small)))
		b.ReportAllocs()
		for b.Loop() {
			d.Reset()
			if _, _, done, err := d.Decode(small, out); !done || err != nil {
				b.Fatal(done, err)
			}
		}
	})
}
