package h1

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func naiveLen(b []byte, class uint8) int {
	for i, c := range b {
		if CharClass[c]&class == 0 {
			return i
		}
	}
	return len(b)
}

// eachByteInEachLane calls fn with a buffer of n bytes of fill but for
// one byte of every value at every position pos, for each fill. fn may
// change the buffer: it is filled afresh for the next call.
func eachByteInEachLane(fills []byte, n int, fn func(buf []byte, pos int)) {
	buf := make([]byte, n)
	for _, fill := range fills {
		for c := 0; c < 256; c++ {
			for pos := range buf {
				for i := range buf {
					buf[i] = fill
				}
				buf[pos] = byte(c)
				fn(buf, pos)
			}
		}
	}
}

func TestScanHelpers(t *testing.T) {
	funcs := []struct {
		name  string
		fn    func([]byte) int
		class uint8
	}{
		{"ValueLen", ValueLen, ClassValue},
		{"TargetLen", TargetLen, ClassTarget},
		{"TokenLen", TokenLen, ClassToken},
		{"TargetQuery", func(b []byte) int {
			n, q := TargetQuery(b)
			if q != bytes.IndexByte(b[:n], '?') {
				return -2 // reported as a wrong length
			}
			return n
		}, ClassTarget},
	}
	for _, f := range funcs {
		// Every byte value in every lane, after clean and after high bytes.
		eachByteInEachLane([]byte{'a', 0xff, '~', '!', '\t', 0x7f, '?'}, 19, func(buf []byte, _ int) {
			if got, want := f.fn(buf), naiveLen(buf, f.class); got != want {
				t.Fatalf("%s(%q) = %d, want %d", f.name, buf, got, want)
			}
		})
		r := rand.New(rand.NewPCG(1, 2))
		for range 20000 {
			buf := make([]byte, r.IntN(40))
			for i := range buf {
				buf[i] = byte(0x1e + r.IntN(0x64)) // around the edges of VCHAR
				if r.IntN(10) == 0 {
					buf[i] = byte(r.IntN(256))
				}
			}
			if got, want := f.fn(buf), naiveLen(buf, f.class); got != want {
				t.Fatalf("%s(%q) = %d, want %d", f.name, buf, got, want)
			}
		}
	}
}

// TestShortTarget: ShortTarget finds what TargetQuery finds for a
// target ending at a SP within its first word with no '?', and declines
// (0) every other, for every byte value in every lane and at offsets.
func TestShortTarget(t *testing.T) {
	check := func(b []byte, i int) {
		t.Helper()
		n, q := TargetQuery(b[i:])
		want := 0
		if len(b)-i >= 8 && n > 0 && n < 8 && q < 0 && b[i+n] == ' ' {
			want = n
		}
		if got := ShortTarget(b, i); got != want {
			t.Fatalf("ShortTarget(%q, %d) = %d, want %d", b, i, got, want)
		}
	}
	eachByteInEachLane([]byte{'/', ' ', '?', 0xff, 0x7f, '\t', '~'}, 12, func(buf []byte, pos int) {
		for i := range 5 {
			check(buf, i)
		}
		if pos+1 < len(buf) {
			buf[pos+1] = ' ' // an end right after it
			check(buf, 0)
		}
	})
	for _, s := range []string{"/ HTTP/1.1", "/json HTTP/1.1", "/1234567 HTTP", "/a?b HTTP/1.1", "/ ", "/      x"} {
		check([]byte(s), 0)
	}
}

// TestTokenEqualFold: for every token byte (every field-value byte for
// the Connection options) and every byte of the names the parser looks
// for, TokenEqualFold agrees with EqualFold.
func TestTokenEqualFold(t *testing.T) {
	for _, name := range []string{"host", "expect", "upgrade", "connection", "content-length", "transfer-encoding",
		"close", "keep-alive", "a", "ab", "abc", "abcdefgh", "abcdefghi"} {
		class := uint8(ClassToken)
		switch name {
		case "close", "keep-alive", "upgrade":
			class = ClassValue
		}
		for i := range len(name) {
			for c := range 256 {
				if CharClass[c]&class == 0 {
					continue
				}
				b := []byte(name)
				b[i] = byte(c)
				if got, want := TokenEqualFold(b, name), EqualFold(b, name); got != want {
					t.Fatalf("%q vs %q: %v, EqualFold says %v", b, name, got, want)
				}
			}
		}
		if name == "host" {
			for i := range 4 {
				for c := range 256 {
					b := []byte(name)
					b[i] = byte(c)
					if IsToken(byte(c)) && IsHost(b) != EqualFold(b, name) {
						t.Fatalf("IsHost(%q) = %v", b, IsHost(b))
					}
				}
			}
		}
		if TokenEqualFold([]byte(name[1:]), name) {
			t.Fatalf("shorter name matched %q", name)
		}
	}
}

// TestFieldLineScanners: ClassEnd, HostLine and PlainValueEnd agree with byte-at-a-
// time rules on every prefix, around every byte value.
func TestFieldLineScanners(t *testing.T) {
	check := func(b []byte) {
		if got, want := ClassEnd(b, 0, ClassToken), naiveLen(b, ClassToken); got != want {
			t.Fatalf("ClassEnd(%q, 0, ClassToken) = %d, want %d", b, got, want)
		}
		if got, want := ClassEnd(b, 0, ClassHost), naiveLen(b, ClassHost); got != want {
			t.Fatalf("ClassEnd(%q, 0, ClassHost) = %d, want %d", b, got, want)
		}
		if got, want := HostLine(b, 0), len(b) >= 8 && EqualFold(b[:4], "host") && b[4] == ':'; got != want {
			t.Fatalf("HostLine(%q, 0) = %v", b, got)
		}
		want := 0
		for want < len(b) && CharClass[b[want]]&ClassValue != 0 && b[want] != '\t' {
			want++
		}
		if got := PlainValueEnd(b, 0); got != want {
			t.Fatalf("PlainValueEnd(%q, 0) = %d, want %d", b, got, want)
		}
	}
	base := []byte("Content-Type: text/plain; charset=utf-8\r\nNext: x\r\n")
	for c := 0; c < 256; c++ {
		for pos := range 5 {
			line := []byte("Host: [::1]:80\r\n")
			line[pos] = byte(c)
			check(line)
		}
	}
	buf := make([]byte, len(base))
	for c := 0; c < 256; c++ {
		for pos := range base {
			copy(buf, base)
			buf[pos] = byte(c)
			for k := 0; k <= len(buf); k++ {
				check(buf[:k])
				check(buf[k:])
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("aZ-:: \t\r\n\x7f\x00\xff~,")
	for range 200000 {
		buf := make([]byte, r.IntN(30))
		for i := range buf {
			buf[i] = alphabet[r.IntN(len(alphabet))]
		}
		check(buf)
	}
}

func TestPlainVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"HTTP/1.1\r\n", true}, {"HTTP/1.0\r\nHost", true}, {"HTTP/1.9\r\n", true},
		{"HTTP/1.1\r", false}, {"HTTP/1.1\n\n", false}, {"HTTP/2.0\r\n", false}, {"HTTP/1.a\r\n", false},
		{"HTTP/1./\r\n", false}, {"HTTP/1.:\r\n", false}, {"http/1.1\r\n", false}, {"HTTP/1,1\r\n", false},
		{"HTTP/1.1\r\r", false}, {"", false},
	} {
		if got := PlainVersion([]byte(tc.in)); got != tc.want {
			t.Errorf("PlainVersion(%q) = %v", tc.in, got)
		}
	}
}
