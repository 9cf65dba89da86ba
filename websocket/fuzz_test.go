package websocket

import (
	"bytes"
	"errors"
	"testing"
)

// decodeOutcome runs a decoder over in, delivered in pieces cut at the
// given points, and summarizes what came out: every control frame and
// message (opcode byte, then payload) and the error code that ended it.
func decodeOutcome(t *testing.T, in []byte, cuts ...int) ([][]byte, StatusCode) {
	d := Decoder{MaxFrame: 1 << 16, MaxMessage: 1 << 17, WaitLimit: 256, Deflate: len(in)%2 == 0}
	var out [][]byte
	var msg []byte
	var buf []byte
	prev := 0
	cuts = append(cuts, len(in))
	for _, cut := range cuts {
		cut = min(max(cut, prev), len(in))
		buf = append(buf, in[prev:cut]...)
		prev = cut
		for len(buf) > 0 {
			before := append([]byte(nil), buf...)
			ch, n, err := d.Next(buf)
			if errors.Is(err, ErrNeedMore) {
				if n != 0 || !bytes.Equal(before, buf) {
					t.Fatalf("ErrNeedMore consumed or changed input")
				}
				break
			}
			if err != nil {
				var pe *ProtocolError
				if !errors.As(err, &pe) {
					t.Fatalf("error %v is not a *ProtocolError", err)
				}
				return out, pe.Code
			}
			if n <= 0 || n > len(buf) {
				t.Fatalf("Next consumed %d of %d bytes", n, len(buf))
			}
			if len(ch.Payload) > n {
				t.Fatalf("payload of %d bytes from %d consumed", len(ch.Payload), n)
			}
			if ch.Opcode.IsControl() {
				if len(ch.Payload) > MaxControlPayload || !ch.First || !ch.Final {
					t.Fatalf("bad control chunk %+v", ch)
				}
				out = append(out, append([]byte{byte(ch.Opcode)}, ch.Payload...))
			} else {
				if ch.First {
					msg = []byte{byte(ch.Opcode)}
				}
				msg = append(msg, ch.Payload...)
				if ch.Final {
					out = append(out, msg)
					msg = nil
				}
			}
			buf = buf[n:]
		}
		buf = append([]byte(nil), buf...) // the reactor keeps the rest in a buffer of its own
	}
	return out, 0
}

// FuzzDecoder checks that the decoder never panics, reports only protocol
// errors, always makes progress, and decodes the same stream the same way
// however it is cut into reads.
func FuzzDecoder(f *testing.F) {
	f.Add(mustMasked(OpText, true, 0, []byte("Hello")), uint16(3), uint16(9))
	f.Add(append(mustMasked(OpText, false, 0, []byte{0xE2, 0x82}), mustMasked(OpContinuation, true, 0, []byte{0xAC})...), uint16(1), uint16(8))
	f.Add(append(mustMasked(OpBinary, false, 0, []byte("ab")), append(mustMasked(OpPing, true, 0, []byte("p")), mustMasked(OpContinuation, true, 0, []byte("cd"))...)...), uint16(5), uint16(13))
	f.Add(mustMasked(OpClose, true, 0, closePayload(1000, "bye")), uint16(2), uint16(4))
	f.Add(mustMasked(OpBinary, true, 0, bytes.Repeat([]byte{1}, 300)), uint16(100), uint16(200))
	f.Add([]byte{0x82, 0xFF, 0, 0, 0, 0, 0, 0, 0, 5, 1, 2, 3, 4}, uint16(3), uint16(10))
	f.Add([]byte{0x81, 0x05, 'h', 'e', 'l', 'l', 'o'}, uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, in []byte, a, b uint16) {
		whole, wholeCode := decodeOutcome(t, append([]byte(nil), in...))
		cut1, cut2 := int(a)%(len(in)+1), int(b)%(len(in)+1)
		if cut1 > cut2 {
			cut1, cut2 = cut2, cut1
		}
		split, splitCode := decodeOutcome(t, append([]byte(nil), in...), cut1, cut2)
		if wholeCode != splitCode {
			t.Fatalf("whole input ends with %d, cut at %d,%d with %d", wholeCode, cut1, cut2, splitCode)
		}
		if wholeCode == 0 && !equalMessages(whole, split) {
			t.Fatalf("different messages: whole %q, cut at %d,%d %q", whole, cut1, cut2, split)
		}
	})
}

func equalMessages(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// FuzzParseHeader checks that every header ParseHeader accepts encodes
// back to the same bytes.
func FuzzParseHeader(f *testing.F) {
	f.Add([]byte{0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d})
	f.Add([]byte{0x82, 0x7E, 0x01, 0x00})
	f.Add([]byte{0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		h, n, err := ParseHeader(in)
		if err != nil {
			return
		}
		if n != h.Len() {
			t.Fatalf("parsed %d bytes, Len says %d", n, h.Len())
		}
		if enc := AppendHeader(nil, &h); !bytes.Equal(enc, in[:n]) {
			t.Fatalf("re-encoded %x, input %x", enc, in[:n])
		}
	})
}
