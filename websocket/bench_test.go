package websocket

import (
	"bytes"
	"fmt"
	"testing"
)

// Decoding one masked frame: header, unmasking in place, UTF-8 for text.
func BenchmarkDecoderNext(b *testing.B) {
	for _, size := range []int{64, 4096} {
		for _, op := range []Opcode{OpBinary, OpText} {
			b.Run(fmt.Sprintf("%s-%dB", op, size), func(b *testing.B) {
				frame := mustMasked(op, true, 0, bytes.Repeat([]byte("x"), size))
				buf := make([]byte, len(frame))
				var d Decoder
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					copy(buf, frame)
					if _, _, err := d.Next(buf); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkMaskBytes(b *testing.B) {
	for _, size := range []int{64, 4096} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			p := make([]byte, size)
			key := [4]byte{1, 2, 3, 4}
			b.SetBytes(int64(size))
			for b.Loop() {
				MaskBytes(key, 1, p)
			}
		})
	}
}

// Compressing and inflating one 4 KiB text message with the pooled
// flate state, as a permessage-deflate connection does per message.
func BenchmarkDeflateMessage(b *testing.B) {
	var fp flatePools
	msg := bytes.Repeat([]byte("market data tick 12345.67 "), 160)[:4096]
	z := fp.compress(nil, msg)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	var out, in []byte
	for b.Loop() {
		out = fp.compress(out[:0], msg)
		var err error
		if in, err = fp.inflate(in[:0], z, 0); err != nil {
			b.Fatal(err)
		}
	}
}
