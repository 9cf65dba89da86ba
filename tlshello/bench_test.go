package tlshello_test

import (
	"testing"

	"github.com/veloq/veloq/tlshello"
)

// BenchmarkParse parses real hellos of crypto/tls's client. A reused
// ClientHello is the common path, as in a proxy loop that keeps one; "fresh"
// allocates one per hello, and "names" alternates two server names, so each
// parse allocates its name.
func BenchmarkParse(b *testing.B) {
	hellos := map[string][]byte{}
	for _, g := range goHellos(b) {
		var h tlshello.ClientHello
		if err := h.Parse(g.raw); err != nil {
			b.Fatal(err)
		}
		hellos[g.name] = g.raw[:h.Len]
	}
	one := hellos["alpn"]
	cases := []struct {
		name   string
		hellos [][]byte
		fresh  bool
		want   error
	}{
		{name: "tls13-alpn", hellos: [][]byte{one}},
		{name: "tls13-resumed", hellos: [][]byte{hellos["tls13-resumed"]}},
		{name: "tls12", hellos: [][]byte{hellos["tls12"]}},
		{name: "records-of-512", hellos: [][]byte{split(fragments(one), 512, 512)}},
		{name: "fresh", hellos: [][]byte{one}, fresh: true},
		{name: "names", hellos: [][]byte{hellos["alpn"], hellos["mlkem"]}},
		{name: "half", hellos: [][]byte{one[:len(one)/2]}, want: tlshello.ErrNeedMore},
		{name: "http", hellos: [][]byte{[]byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")}, want: tlshello.ErrNotTLS},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.hellos[0])))
			b.ReportAllocs()
			var h tlshello.ClientHello
			i := 0
			for b.Loop() {
				if c.fresh {
					h = tlshello.ClientHello{}
				}
				if err := h.Parse(c.hellos[i%len(c.hellos)]); err != c.want {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
