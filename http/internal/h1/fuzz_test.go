package h1

import (
	"bytes"
	"errors"
	"testing"
)

func FuzzChunked(f *testing.F) {
	for _, tc := range chunkedValid {
		f.Add([]byte(tc.in))
	}
	for _, tc := range chunkedInvalid {
		if len(tc.in) < 1024 {
			f.Add([]byte(tc.in))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		l := Limits{MaxHeaderBytes: 128, MaxHeaders: 4, MaxBodyBytes: 1 << 16}
		d := ChunkedDecoder{Limits: l}
		body, trailer, n, err := decodeAll(&d, in)
		if len(body) > len(in) || n > len(in) {
			t.Fatalf("body %d, consumed %d, input %d", len(body), n, len(in))
		}
		if err != nil && err != ErrNeedMore {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T", err)
			}
		}

		// Byte-by-byte feeding agrees.
		s := ChunkedDecoder{Limits: l}
		body2, trailer2, err2 := decodeSplit(&s, in)
		if statusOf(err2) != statusOf(err) || !bytes.Equal(body, body2) || !bytes.Equal(trailer, trailer2) {
			t.Fatalf("split: %q %q %v; whole: %q %q %v", body2, trailer2, err2, body, trailer, err)
		}

		// In-place Decode agrees.
		buf := append([]byte(nil), in...)
		c := ChunkedDecoder{Limits: l}
		consumed, produced, done, err3 := c.Decode(buf, buf)
		if statusOf(err3) != statusOf(err) || !bytes.Equal(buf[:produced], body) {
			t.Fatalf("Decode: %q %v; Next: %q %v", buf[:produced], err3, body, err)
		}
		if done && (consumed != n || !bytes.Equal(c.Trailer(buf), trailer)) {
			t.Fatalf("Decode consumed %d, Next %d", consumed, n)
		}
	})
}
