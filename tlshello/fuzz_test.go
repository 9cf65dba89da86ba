package tlshello_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/tlshello"
)

// FuzzParse checks that Parse never panics and that its answers agree
// with each other: a parsed hello is consistent and parses the same
// however it is cut into records and whatever follows it, ErrNeedMore comes
// only for input shorter than its headers promise, and a final error stays
// final when more bytes arrive.
func FuzzParse(f *testing.F) {
	for _, g := range goHellos(f) {
		f.Add(g.raw)
		if msg := fragments(g.raw); len(msg) > 0 {
			f.Add(split(msg, 3, 60, 200))
		}
	}
	f.Add(hello(sniExt("example.com"), alpnExt("h2", "http/1.1"), versionsExt(0x0304, 0x0303), ext(41, make([]byte, 8))))
	f.Add(hello(ext(0, v16([]byte{1}, v16([]byte("x")), []byte{0}, v16([]byte("a.example")))), ext(0x0a0a), ext(0xff01, []byte{0})))
	f.Add(record(message(prelude(0x0301))))
	f.Add(split(message(body(sniExt("a.example"))), 1, 2, 1))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"))
	f.Add([]byte{22, 3, 1, 0x40, 0x00, 1, 0x00, 0x44, 0x00})

	f.Fuzz(func(t *testing.T, b []byte) {
		var h tlshello.ClientHello
		err := h.Parse(b)
		switch {
		case err == nil:
			checkHello(t, &h, b)
		case err == tlshello.ErrNeedMore:
			require.True(t, endsEarly(b), "ErrNeedMore for input holding all its headers promise")
			require.Less(t, len(b), tlshello.MaxLen)
			require.Equal(t, fields{}, fieldsOf(&h))
		default:
			require.True(t, errors.Is(err, tlshello.ErrNotTLS) || errors.Is(err, tlshello.ErrMalformed) || errors.Is(err, tlshello.ErrTooLarge), "unexpected error %v", err)
			require.NotErrorIs(t, err, tlshello.ErrNeedMore)
			require.Equal(t, fields{}, fieldsOf(&h))
			for _, tail := range [][]byte{{0}, b} {
				err := h.Parse(cat(b, tail))
				require.Error(t, err, "an error became a hello when more bytes arrived")
				require.NotErrorIs(t, err, tlshello.ErrNeedMore, "an error became ErrNeedMore when more bytes arrived")
			}
		}
	})
}

// checkHello checks what Parse found in b.
func checkHello(t *testing.T, h *tlshello.ClientHello, b []byte) {
	require.Positive(t, h.Len)
	require.LessOrEqual(t, h.Len, len(b))
	require.LessOrEqual(t, h.Len, tlshello.MaxLen)
	require.False(t, endsEarly(b[:h.Len]))
	require.Equal(t, uint8(3), uint8(h.LegacyVersion>>8))
	require.NotEmpty(t, h.CipherSuites)
	if n := h.ServerName; n != "" {
		require.NotContains(t, n, "\x00")
		require.False(t, n[len(n)-1] == '.', "ServerName %q ends in a dot", n)
		for i := range len(n) {
			require.True(t, n[i] > ' ' && n[i] <= '~', "ServerName %q has byte %#x", n, n[i])
		}
	}
	for _, p := range h.ALPN {
		require.NotEmpty(t, p)
		require.LessOrEqual(t, len(p), 255)
	}
	require.LessOrEqual(t, len(h.SupportedVersions), 127)

	want := fieldsOf(h)
	want.ALPN = append([]string(nil), want.ALPN...)
	want.SupportedVersions = append([]uint16(nil), want.SupportedVersions...)
	want.CipherSuites = append([]uint16(nil), want.CipherSuites...)
	var g tlshello.ClientHello
	same := func(b []byte, what string) {
		require.NoError(t, g.Parse(b), what)
		got := fieldsOf(&g)
		got.Len, want.Len = 0, 0
		require.Equal(t, want, got, what)
	}

	// The hello alone, and followed by more.
	hello := b[:h.Len]
	same(hello, "the hello alone")
	same(cat(hello, bytes.Repeat([]byte{0x16}, 7)), "the hello and more")

	// Its prefixes ask for more: check a few of them, all would be slow.
	for _, n := range []int{0, 1, 5, h.Len / 2, h.Len - 1} {
		require.ErrorIs(t, g.Parse(hello[:min(n, h.Len-1)]), tlshello.ErrNeedMore, "prefix of %d bytes", n)
	}

	// The handshake message in one record if it fits, and in small ones.
	msg := fragments(hello)
	if len(msg) <= 1<<14 {
		same(record(msg), "in one record")
	}
	if len(msg) <= 4000 {
		same(split(msg, 1, 3, 5, 16, 64), "in small records")
	}
}

// FuzzFields builds hellos from a fuzzed server name and protocol list
// (comma-separated), cuts them into records, and checks that Parse finds
// exactly what was built, or refuses what RFC 6066 and RFC 7301 forbid.
func FuzzFields(f *testing.F) {
	f.Add("example.com", "h2,http/1.1", uint16(0), uint16(0))
	f.Add("Example.COM", "acme-tls/1", uint16(1), uint16(3))
	f.Add("", "", uint16(50), uint16(0))
	f.Add("a.example.", "h2", uint16(0), uint16(0))
	f.Add("bad\x00name", "h2,,x", uint16(9), uint16(9))
	f.Fuzz(func(t *testing.T, name, alpn string, cut1, cut2 uint16) {
		if len(name) > 2000 || len(alpn) > 2000 {
			return
		}
		var exts [][]byte
		valid := true
		if name != "" {
			exts = append(exts, sniExt(name))
			for i := range len(name) {
				valid = valid && name[i] > ' ' && name[i] <= '~'
			}
			valid = valid && name[len(name)-1] != '.'
		}
		var protos []string
		if alpn != "" {
			protos = strings.Split(alpn, ",")
			for _, p := range protos {
				if len(p) > 255 {
					return // more than a protocol name's length byte can say
				}
				valid = valid && p != ""
			}
			exts = append(exts, alpnExt(protos...))
		}
		b := split(message(body(exts...)), int(cut1), int(cut2))

		var h tlshello.ClientHello
		err := h.Parse(b)
		if !valid {
			require.ErrorIs(t, err, tlshello.ErrMalformed)
			return
		}
		require.NoError(t, err)
		require.Equal(t, len(b), h.Len)
		require.Equal(t, name, h.ServerName)
		require.Equal(t, len(protos), len(h.ALPN))
		if len(protos) > 0 {
			require.Equal(t, protos, h.ALPN)
		}
	})
}
