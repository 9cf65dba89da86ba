//go:build unix

package proxy

import "testing"

// recordMarks counts each visible record header and each complete record,
// so a hello is parsed again only when one of them arrives.
func TestRecordMarks(t *testing.T) {
	rec := func(n int) []byte { return append([]byte{22, 3, 1, byte(n >> 8), byte(n)}, make([]byte, n)...) }
	two := append(rec(3), rec(300)...)
	for _, tc := range []struct {
		in   []byte
		want int
	}{
		{nil, 0},
		{[]byte{22, 3, 1, 1}, 0},
		{rec(3)[:5], 1},
		{rec(3)[:7], 1},
		{rec(3), 2},
		{two[:9], 2},
		{two[:12], 2},
		{two[:13], 3},
		{two[:100], 3},
		{two, 4},
	} {
		if got := recordMarks(tc.in); got != tc.want {
			t.Errorf("recordMarks(%d bytes) = %d, want %d", len(tc.in), got, tc.want)
		}
	}
}
