package h1

import (
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

func TestScanHelpers(t *testing.T) {
	funcs := []struct {
		name  string
		fn    func([]byte) int
		class uint8
	}{
		{"ValueLen", ValueLen, ClassValue},
		{"TargetLen", TargetLen, ClassTarget},
		{"TokenLen", TokenLen, ClassToken},
	}
	for _, f := range funcs {
		// Every byte value in every lane, after clean and after high bytes.
		for _, fill := range []byte{'a', 0xff, '~', '!', '\t', 0x7f} {
			buf := make([]byte, 19)
			for c := 0; c < 256; c++ {
				for pos := range buf {
					for i := range buf {
						buf[i] = fill
					}
					buf[pos] = byte(c)
					if got, want := f.fn(buf), naiveLen(buf, f.class); got != want {
						t.Fatalf("%s(%q) = %d, want %d", f.name, buf, got, want)
					}
				}
			}
		}
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

// TestTokenEqualFold: for every token byte and every byte of the names
// the parser looks for, TokenEqualFold agrees with EqualFold.
func TestTokenEqualFold(t *testing.T) {
	for _, name := range []string{"host", "expect", "upgrade", "connection", "content-length", "transfer-encoding"} {
		for i := range len(name) {
			for c := range 256 {
				if !IsToken(byte(c)) {
					continue
				}
				b := []byte(name)
				b[i] = byte(c)
				if got, want := TokenEqualFold(b, name), EqualFold(b, name); got != want {
					t.Fatalf("%q vs %q: %v, EqualFold says %v", b, name, got, want)
				}
			}
		}
		if TokenEqualFold([]byte(name[1:]), name) {
			t.Fatalf("shorter name matched %q", name)
		}
	}
}
