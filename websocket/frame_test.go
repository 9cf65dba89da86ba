package websocket

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []Header{
		{Fin: true, Opcode: OpText, Length: 0},
		{Fin: true, Opcode: OpBinary, Length: 125, Masked: true, Mask: [4]byte{1, 2, 3, 4}},
		{Fin: false, Opcode: OpText, Length: 126, Rsv: Rsv1},
		{Fin: true, Opcode: OpContinuation, Length: 0xFFFF, Masked: true, Mask: [4]byte{9, 8, 7, 6}},
		{Fin: true, Opcode: OpBinary, Length: 0x10000},
		{Fin: true, Opcode: OpPing, Length: 5, Rsv: Rsv1 | Rsv2 | Rsv3},
		{Fin: true, Opcode: OpBinary, Length: 1 << 40, Masked: true},
	} {
		b := AppendHeader(nil, &h)
		require.Len(t, b, h.Len())
		got, n, err := ParseHeader(b)
		require.NoError(t, err)
		assert.Equal(t, len(b), n)
		assert.Equal(t, h, got)
		for i := range len(b) {
			_, _, err := ParseHeader(b[:i])
			assert.ErrorIs(t, err, ErrNeedMore, "prefix of %d bytes", i)
		}
	}
}

// RFC 6455 §5.7's examples, byte for byte.
func TestRFCExamples(t *testing.T) {
	unmaskedHello := []byte{0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f}
	maskedHello := []byte{0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58}

	d := Decoder{FromServer: true}
	ch, n, err := d.Next(append([]byte(nil), unmaskedHello...))
	require.NoError(t, err)
	assert.Equal(t, 7, n)
	assert.Equal(t, "Hello", string(ch.Payload))
	assert.True(t, ch.First && ch.Final)

	var srv Decoder
	ch, n, err = srv.Next(append([]byte(nil), maskedHello...))
	require.NoError(t, err)
	assert.Equal(t, 11, n)
	assert.Equal(t, "Hello", string(ch.Payload))
	assert.Equal(t, OpText, ch.Opcode)

	// The same frame encoded by PutHeader.
	h := Header{Fin: true, Opcode: OpText, Length: 5}
	assert.Equal(t, unmaskedHello[:2], AppendHeader(nil, &h))

	// A fragmented unmasked text message: "Hel" then "lo".
	d = Decoder{FromServer: true}
	in := []byte{0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f}
	ch, n, err = d.Next(in)
	require.NoError(t, err)
	assert.Equal(t, "Hel", string(ch.Payload))
	assert.True(t, ch.First)
	assert.False(t, ch.Final)
	ch, _, err = d.Next(in[n:])
	require.NoError(t, err)
	assert.Equal(t, "lo", string(ch.Payload))
	assert.Equal(t, OpText, ch.Opcode, "continuations report the message's opcode")
	assert.True(t, ch.Final)

	// 256 bytes of binary data in one unmasked frame: 16-bit length.
	h = Header{Fin: true, Opcode: OpBinary, Length: 256}
	assert.Equal(t, []byte{0x82, 0x7E, 0x01, 0x00}, AppendHeader(nil, &h))
	// 64 KiB: 64-bit length.
	h = Header{Fin: true, Opcode: OpBinary, Length: 65536}
	assert.Equal(t, []byte{0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0}, AppendHeader(nil, &h))
}

func TestMaskBytes(t *testing.T) {
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	for n := range 70 {
		for start := range 4 {
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(i * 7)
			}
			want := make([]byte, n)
			for i := range p {
				want[i] = p[i] ^ key[(start+i)&3]
			}
			end := MaskBytes(key, start, p)
			require.Equal(t, want, p, "n=%d start=%d", n, start)
			require.Equal(t, (start+n)&3, end)
		}
	}
	// Chunked unmasking equals one pass.
	p := make([]byte, 1000)
	for i := range p {
		p[i] = byte(i)
	}
	one := append([]byte(nil), p...)
	MaskBytes(key, 0, one)
	pos := 0
	for off := 0; off < len(p); {
		n := min(len(p)-off, 1+off%37)
		pos = MaskBytes(key, pos, p[off:off+n])
		off += n
	}
	require.Equal(t, one, p)
}

func TestUTF8ValidatorAcrossPieces(t *testing.T) {
	cases := [][]byte{
		[]byte("hello"),
		[]byte("κόσμε"),
		[]byte("€𝄞 mixed ascii ✓"),
		{0xF4, 0x8F, 0xBF, 0xBF}, // U+10FFFF
		{0xF4, 0x90, 0x80, 0x80}, // above U+10FFFF
		{0xED, 0xA0, 0x80},       // a surrogate
		{0xC0, 0xAF},             // overlong '/'
		{0xE0, 0x80, 0xAF},       // overlong
		{0xCE, 0xBA, 0xE1, 0xBD}, // truncated at the end
		{0x80},                   // lone continuation
		{0xFF},                   // never valid
		{0xCE, 0xBA, 0xE1, 0xBD, 0xB9, 0xCF, 0x83, 0xCE, 0xBC, 0xCE, 0xB5, 0xED, 0xA0, 0x80, 0x65, 0x64, 0x69, 0x74, 0x65, 0x64},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		b := make([]byte, r.IntN(12))
		for j := range b {
			b[j] = byte(r.IntN(256))
			if r.IntN(3) == 0 {
				b[j] = 0x80 | byte(r.IntN(64))
			}
		}
		cases = append(cases, b)
	}
	for _, msg := range cases {
		want := utf8.Valid(msg)
		// Every way of cutting msg in two and three pieces.
		for i := 0; i <= len(msg); i++ {
			for j := i; j <= len(msg); j++ {
				var v utf8Validator
				ok := v.write(msg[:i]) && v.write(msg[i:j]) && v.write(msg[j:])
				ok = ok && v.complete()
				require.Equal(t, want, ok, "%x cut at %d,%d", msg, i, j)
			}
		}
	}
}

func mustMasked(op Opcode, fin bool, rsv uint8, payload []byte) []byte {
	key := [4]byte{0xA1, 0xB2, 0xC3, 0xD4}
	h := Header{Fin: fin, Rsv: rsv, Opcode: op, Masked: true, Mask: key, Length: int64(len(payload))}
	b := AppendHeader(nil, &h)
	start := len(b)
	b = append(b, payload...)
	MaskBytes(key, 0, b[start:])
	return b
}

func closePayload(code uint16, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, code), reason...)
}

// The decoder alone, on the protocol rules (the same rules the socket
// tests check end to end).
func TestDecoderRules(t *testing.T) {
	long64 := []byte{0x82, 0xFF, 0, 0, 0, 0, 0, 0, 0, 5, 1, 2, 3, 4} // 64-bit length 5
	long16 := []byte{0x82, 0xFE, 0, 5, 1, 2, 3, 4}                   // 16-bit length 5
	msb := []byte{0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}
	cases := []struct {
		name string
		in   []byte
		code StatusCode // 0: no error
	}{
		{"text", mustMasked(OpText, true, 0, []byte("ok")), 0},
		{"unmasked", []byte{0x81, 0x02, 'o', 'k'}, StatusProtocolError},
		{"rsv1 without extension", mustMasked(OpText, true, Rsv1, []byte("x")), StatusProtocolError},
		{"rsv2", mustMasked(OpText, true, Rsv2, []byte("x")), StatusProtocolError},
		{"rsv3", mustMasked(OpBinary, true, Rsv3, nil), StatusProtocolError},
		{"opcode 3", mustMasked(3, true, 0, nil), StatusProtocolError},
		{"opcode 7", mustMasked(7, true, 0, nil), StatusProtocolError},
		{"opcode 0xB", mustMasked(0xB, true, 0, nil), StatusProtocolError},
		{"opcode 0xF", mustMasked(0xF, true, 0, nil), StatusProtocolError},
		{"fragmented ping", mustMasked(OpPing, false, 0, nil), StatusProtocolError},
		{"ping 126 bytes", mustMasked(OpPing, true, 0, make([]byte, 126)), StatusProtocolError},
		{"ping 125 bytes", mustMasked(OpPing, true, 0, make([]byte, 125)), 0},
		{"continuation first", mustMasked(OpContinuation, true, 0, nil), StatusProtocolError},
		{"text inside fragmented", append(mustMasked(OpText, false, 0, []byte("a")), mustMasked(OpText, true, 0, []byte("b"))...), StatusProtocolError},
		{"invalid utf8", mustMasked(OpText, true, 0, []byte{0xce, 0xba, 0xff}), StatusInvalidPayload},
		{"utf8 truncated at end", mustMasked(OpText, true, 0, []byte{0xce}), StatusInvalidPayload},
		{"utf8 across fragments", append(mustMasked(OpText, false, 0, []byte{0xE2, 0x82}), mustMasked(OpContinuation, true, 0, []byte{0xAC})...), 0},
		{"bad utf8 across fragments", append(mustMasked(OpText, false, 0, []byte{0xE2, 0x82}), mustMasked(OpContinuation, true, 0, []byte{0x41})...), StatusInvalidPayload},
		{"binary is not utf8-checked", mustMasked(OpBinary, true, 0, []byte{0xff}), 0},
		{"close 1 byte", mustMasked(OpClose, true, 0, []byte{3}), StatusProtocolError},
		{"close 999", mustMasked(OpClose, true, 0, closePayload(999, "")), StatusProtocolError},
		{"close 1004", mustMasked(OpClose, true, 0, closePayload(1004, "")), StatusProtocolError},
		{"close 1005", mustMasked(OpClose, true, 0, closePayload(1005, "")), StatusProtocolError},
		{"close 1006", mustMasked(OpClose, true, 0, closePayload(1006, "")), StatusProtocolError},
		{"close 1015", mustMasked(OpClose, true, 0, closePayload(1015, "")), StatusProtocolError},
		{"close 2999", mustMasked(OpClose, true, 0, closePayload(2999, "")), StatusProtocolError},
		{"close 5000", mustMasked(OpClose, true, 0, closePayload(5000, "")), StatusProtocolError},
		{"close reason not utf8", mustMasked(OpClose, true, 0, closePayload(1000, "\xff")), StatusInvalidPayload},
		{"close 4999", mustMasked(OpClose, true, 0, closePayload(4999, "ok")), 0},
		{"non-minimal 64-bit length", long64, StatusProtocolError},
		{"non-minimal 16-bit length", long16, StatusProtocolError},
		{"64-bit length msb", msb, StatusProtocolError},
		{"frame over limit", mustMasked(OpBinary, true, 0, make([]byte, 101)), StatusMessageTooBig},
		{"message over limit", append(mustMasked(OpBinary, false, 0, make([]byte, 100)), mustMasked(OpContinuation, true, 0, make([]byte, 101))...), StatusMessageTooBig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decoder{MaxFrame: 100, MaxMessage: 200}
			in := append([]byte(nil), tc.in...)
			var err error
			for len(in) > 0 {
				var n int
				_, n, err = d.Next(in)
				if err != nil {
					break
				}
				in = in[n:]
			}
			if tc.code == 0 {
				require.NoError(t, err)
				return
			}
			var pe *ProtocolError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tc.code, pe.Code, pe.Reason)
			require.ErrorIs(t, err, ErrProtocol)
		})
	}
}

// decodeAll runs a decoder over in, cut into pieces of the given sizes as
// a socket would deliver them, and returns the messages it assembles
// (op byte, then payload) or the first error. Unconsumed bytes are kept
// and presented again with the next piece, as the reactor does.
func decodeAll(d *Decoder, in []byte, cut func(int) int) ([][]byte, error) {
	var out [][]byte
	var msg []byte
	var buf []byte
	for off := 0; off < len(in); {
		n := min(len(in)-off, cut(off))
		buf = append(buf, in[off:off+n]...)
		off += n
		for len(buf) > 0 {
			ch, used, err := d.Next(buf)
			if err == ErrNeedMore {
				break
			}
			if err != nil {
				return out, err
			}
			if ch.Opcode.IsControl() {
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
			buf = buf[used:]
		}
		buf = append([]byte(nil), buf...)
	}
	return out, nil
}

func TestDecoderSplitsAndStreaming(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 KB: streamed
	var in []byte
	in = append(in, mustMasked(OpText, false, 0, []byte("frag"))...)
	in = append(in, mustMasked(OpPing, true, 0, []byte("p"))...)
	in = append(in, mustMasked(OpContinuation, true, 0, []byte("ment €"))...)
	in = append(in, mustMasked(OpBinary, true, 0, big)...)
	in = append(in, mustMasked(OpClose, true, 0, closePayload(1000, "bye"))...)
	want := [][]byte{
		{byte(OpPing), 'p'},
		append([]byte{byte(OpText)}, "fragment €"...),
		append([]byte{byte(OpBinary)}, big...),
		append([]byte{byte(OpClose)}, closePayload(1000, "bye")...),
	}
	for _, step := range []int{1, 2, 3, 7, 100, 4096, 1 << 20} {
		var d Decoder
		got, err := decodeAll(&d, in, func(int) int { return step })
		require.NoError(t, err, "step %d", step)
		require.Equal(t, want, got, "step %d", step)
	}
}

// The codec's hot paths allocate nothing: decoding (header, unmasking,
// UTF-8) and encoding a header.
func TestCodecAllocatesNothing(t *testing.T) {
	frame := mustMasked(OpText, true, 0, []byte("a message of some length, κόσμε"))
	buf := make([]byte, len(frame))
	var d Decoder
	allocs := testing.AllocsPerRun(100, func() {
		copy(buf, frame)
		if _, _, err := d.Next(buf); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "Decoder.Next")
	var hdr [MaxHeaderLen]byte
	allocs = testing.AllocsPerRun(100, func() {
		h := Header{Fin: true, Opcode: OpBinary, Length: 70000}
		PutHeader(hdr[:], &h)
	})
	require.Zero(t, allocs, "PutHeader")
}
