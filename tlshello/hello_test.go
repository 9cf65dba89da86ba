package tlshello_test

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/tlshello"
)

// parse parses b with a new ClientHello.
func parse(b []byte) (*tlshello.ClientHello, error) {
	var h tlshello.ClientHello
	err := h.Parse(b)
	return &h, err
}

// fields is what a test expects of a parsed ClientHello.
type fields struct {
	ServerName        string
	ALPN              []string
	SupportedVersions []uint16
	CipherSuites      []uint16
	LegacyVersion     uint16
	Len               int
}

// fieldsOf returns h's fields with empty slices as nil, so that a reused
// ClientHello compares equal to a new one.
func fieldsOf(h *tlshello.ClientHello) fields {
	orNil := func(s []uint16) []uint16 {
		if len(s) == 0 {
			return nil
		}
		return s
	}
	f := fields{
		ServerName:        h.ServerName,
		SupportedVersions: orNil(h.SupportedVersions),
		CipherSuites:      orNil(h.CipherSuites),
		LegacyVersion:     h.LegacyVersion,
		Len:               h.Len,
	}
	if len(h.ALPN) > 0 {
		f.ALPN = h.ALPN
	}
	return f
}

// The hellos of crypto/tls's client parse to what their configs say and to
// what crypto/tls's server saw in them.
func TestGoHellos(t *testing.T) {
	for _, g := range goHellos(t) {
		t.Run(g.name, func(t *testing.T) {
			h, err := parse(g.raw)
			require.NoError(t, err)
			require.Positive(t, h.Len)
			require.LessOrEqual(t, h.Len, len(g.raw))
			require.False(t, endsEarly(g.raw[:h.Len]))

			assert.Equal(t, g.config.ServerName, h.ServerName, "ServerName as the config has it")
			assert.Equal(t, g.info.ServerName, h.ServerName, "ServerName as crypto/tls's server saw it")
			assert.Equal(t, len(g.config.NextProtos), len(h.ALPN))
			if len(h.ALPN) > 0 {
				assert.Equal(t, g.config.NextProtos, h.ALPN)
				assert.Equal(t, g.info.SupportedProtos, h.ALPN)
			}
			assert.Equal(t, g.info.CipherSuites, h.CipherSuites)
			if g.config.CipherSuites != nil {
				for _, c := range g.config.CipherSuites {
					assert.Contains(t, h.CipherSuites, c)
				}
			}
			assert.Equal(t, uint16(tls.VersionTLS12), h.LegacyVersion)
			// crypto/tls's client always lists the versions from its
			// maximum down to its minimum.
			maxV, minV := g.config.MaxVersion, g.config.MinVersion
			if maxV == 0 {
				maxV = tls.VersionTLS13
			}
			if minV == 0 {
				minV = tls.VersionTLS12
			}
			var want []uint16
			for v := maxV; v >= minV; v-- {
				want = append(want, v)
			}
			assert.Equal(t, want, h.SupportedVersions)
			assert.Equal(t, g.info.SupportedVersions, h.SupportedVersions)
		})
	}
}

// The hellos of openssl s_client parse to what its arguments ask for.
func TestOpenSSLHellos(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want fields
		top  uint16 // the first of SupportedVersions; what follows depends on openssl's configuration
	}{
		{
			name: "sni-alpn",
			args: []string{"-servername", "example.com", "-alpn", "h2,http/1.1"},
			want: fields{ServerName: "example.com", ALPN: []string{"h2", "http/1.1"}},
			top:  tls.VersionTLS13,
		},
		{
			name: "no-sni",
			args: []string{"-noservername"},
			top:  tls.VersionTLS13,
		},
		{
			name: "tls12",
			args: []string{"-tls1_2", "-servername", "backend.internal", "-alpn", "http/1.1"},
			want: fields{ServerName: "backend.internal", ALPN: []string{"http/1.1"}},
		},
		{
			name: "tls13",
			args: []string{"-tls1_3", "-servername", "Mixed.Case.Example"},
			want: fields{ServerName: "Mixed.Case.Example", SupportedVersions: []uint16{tls.VersionTLS13}},
			top:  tls.VersionTLS13,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := openSSLHello(t, tc.args...)
			h, err := parse(b)
			require.NoError(t, err)
			require.Equal(t, len(b), h.Len)
			assert.NotEmpty(t, h.CipherSuites)
			assert.Equal(t, uint16(tls.VersionTLS12), h.LegacyVersion)
			if tc.top == 0 {
				assert.Empty(t, h.SupportedVersions)
			} else {
				require.NotEmpty(t, h.SupportedVersions)
				assert.Equal(t, tc.top, h.SupportedVersions[0])
			}
			got := fieldsOf(h)
			got.CipherSuites, got.Len, got.LegacyVersion = nil, 0, 0
			if tc.want.SupportedVersions == nil {
				got.SupportedVersions = nil
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// validHellos returns hellos that parse, real ones and built ones, each
// exactly as long as its records.
func validHellos(t *testing.T) map[string][]byte {
	m := map[string][]byte{
		"built":          hello(sniExt("example.com"), alpnExt("h2"), versionsExt(0x0304)),
		"no-extensions":  record(message(prelude(0x0301))),
		"two-records":    split(message(body(sniExt("a.example"), alpnExt("h2", "http/1.1"))), 40),
		"header-split":   split(message(body(sniExt("a.example"))), 1, 2, 1),
		"one-byte-each":  split(message(body(sniExt("a.example"), alpnExt("x"))), slices.Repeat([]int{1}, 200)...),
		"unknown-ext-at": hello(sniExt("a.example"), ext(0xfe0d, make([]byte, 100))),
	}
	for _, g := range goHellos(t) {
		h, err := parse(g.raw)
		require.NoError(t, err)
		m["go-"+g.name] = g.raw[:h.Len]
	}
	return m
}

// Every proper prefix of a hello asks for more, and the whole hello
// followed by anything parses the same as the hello alone.
func TestPrefixes(t *testing.T) {
	for name, b := range validHellos(t) {
		t.Run(name, func(t *testing.T) {
			whole, err := parse(b)
			require.NoError(t, err)
			require.Equal(t, len(b), whole.Len)
			var h tlshello.ClientHello
			for n := range len(b) {
				err := h.Parse(b[:n])
				require.ErrorIs(t, err, tlshello.ErrNeedMore, "prefix of %d bytes", n)
				require.Equal(t, fields{}, fieldsOf(&h), "prefix of %d bytes leaves fields set", n)
				require.True(t, endsEarly(b[:n]))
			}
			for _, tail := range [][]byte{{0}, []byte("GET / HTTP/1.1\r\n"), b} {
				require.NoError(t, h.Parse(cat(b, tail)))
				require.Equal(t, fieldsOf(whole), fieldsOf(&h))
			}
		})
	}
}

// A hello split across records in any way parses as it does in one.
func TestRecordSplits(t *testing.T) {
	splits := [][]int{{1}, {2}, {3}, {4}, {5}, {1, 1, 1, 1, 1}, {40}, {100, 100}, {7, 300, 2}, slices.Repeat([]int{9}, 1000)}
	for name, b := range validHellos(t) {
		msg := fragments(b)
		whole, err := parse(record(msg))
		require.NoError(t, err, name)
		for _, sizes := range splits {
			t.Run(fmt.Sprintf("%s/%v", name, sizes[:min(len(sizes), 5)]), func(t *testing.T) {
				sb := split(msg, sizes...)
				h, err := parse(sb)
				require.NoError(t, err)
				want := fieldsOf(whole)
				want.Len = len(sb)
				require.Equal(t, want, fieldsOf(h))
			})
		}
	}
}

// Built hellos that are valid parse to what they hold.
func TestValid(t *testing.T) {
	suites := []uint16{0x1301, 0xc02f}
	tests := []struct {
		name string
		b    []byte
		want fields
	}{
		{
			name: "no-extensions",
			b:    record(message(prelude(0x0301))),
			want: fields{LegacyVersion: 0x0301},
		},
		{
			name: "empty-extensions",
			b:    hello(),
		},
		{
			name: "sni-alpn-versions",
			b:    hello(sniExt("Example.COM"), alpnExt("h2", "http/1.1"), versionsExt(0x0304, 0x0303)),
			want: fields{ServerName: "Example.COM", ALPN: []string{"h2", "http/1.1"}, SupportedVersions: []uint16{0x0304, 0x0303}},
		},
		{
			name: "unknown-name-type-skipped",
			b:    hello(ext(0, v16([]byte{7}, v16([]byte("other")), []byte{0}, v16([]byte("a.example"))))),
			want: fields{ServerName: "a.example"},
		},
		{
			name: "only-unknown-name-type",
			b:    hello(ext(0, v16([]byte{1}, v16()))),
		},
		{
			name: "ip-literal",
			b:    hello(sniExt("192.0.2.1")),
			want: fields{ServerName: "192.0.2.1"},
		},
		{
			name: "grease-and-unknown-extensions",
			b:    hello(ext(0x0a0a), sniExt("a.example"), ext(0x1a1a, []byte{0}), ext(0xff01, []byte{0}), ext(0xfe0d, make([]byte, 300)), versionsExt(0x3a3a, 0x0304)),
			want: fields{ServerName: "a.example", SupportedVersions: []uint16{0x3a3a, 0x0304}},
		},
		{
			name: "pre-shared-key-last",
			b:    hello(sniExt("a.example"), ext(41, make([]byte, 40))),
			want: fields{ServerName: "a.example"},
		},
		{
			name: "long-alpn",
			b:    hello(alpnExt(string(bytes.Repeat([]byte{'p'}, 255)), "x")),
			want: fields{ALPN: []string{string(bytes.Repeat([]byte{'p'}, 255)), "x"}},
		},
		{
			name: "record-version-ignored-after-first",
			b:    cat(record(message(body())[:10]), []byte{22, 9, 9}, u16(len(message(body()))-10), message(body())[10:]),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := parse(tc.b)
			require.NoError(t, err)
			want := tc.want
			want.Len = len(tc.b)
			if want.LegacyVersion == 0 {
				want.LegacyVersion = 0x0303
			}
			want.CipherSuites = suites
			require.Equal(t, want, fieldsOf(h))
		})
	}
}

// Input that is not a ClientHello, or a broken one, gets a final error
// saying so, whatever follows it.
func TestInvalid(t *testing.T) {
	long := message(body(ext(0xfe0d, make([]byte, 17000))))
	tests := []struct {
		name string
		b    []byte
		want error
		msg  string // in the error's message
	}{
		// Not TLS, from the first bytes.
		{name: "http", b: []byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"), want: tlshello.ErrNotTLS},
		{name: "one-byte", b: []byte("G"), want: tlshello.ErrNotTLS},
		{name: "sslv2-hello", b: []byte{0x80, 0x2e, 0x01, 0x03, 0x01, 0x00, 0x15}, want: tlshello.ErrNotTLS},
		{name: "alert-record", b: []byte{21, 3, 3, 0, 2, 2, 40}, want: tlshello.ErrNotTLS},
		{name: "application-data", b: []byte{23, 3, 3, 0, 1, 0}, want: tlshello.ErrNotTLS},
		{name: "not-version-3", b: []byte{22, 2}, want: tlshello.ErrNotTLS},
		{name: "dtls", b: []byte{22, 0xfe, 0xfd}, want: tlshello.ErrNotTLS},
		{name: "server-hello", b: record(cat([]byte{2}, message(body())[1:])), want: tlshello.ErrNotTLS},
		{name: "server-hello-type-only", b: []byte{22, 3, 1, 0, 50, 2}, want: tlshello.ErrNotTLS},

		// Records.
		{name: "empty-record", b: []byte{22, 3, 1, 0, 0}, want: tlshello.ErrMalformed, msg: "empty handshake record"},
		{name: "record-overflow", b: []byte{22, 3, 1, 0x40, 0x01}, want: tlshello.ErrMalformed, msg: "exceeds 2^14"},
		{name: "alert-between-records", b: cat(record(message(body())[:10]), []byte{21, 3, 3, 0, 2, 2, 40}), want: tlshello.ErrMalformed, msg: "record of type 21"},
		{name: "record-past-hello", b: record(cat(message(body()), []byte{0})), want: tlshello.ErrMalformed, msg: "1 bytes past the ClientHello"},
		{name: "later-record-past-hello", b: cat(record(message(body())[:10]), record(cat(message(body())[10:], []byte{1, 2}))), want: tlshello.ErrMalformed, msg: "past the ClientHello"},
		{name: "empty-later-record", b: cat(record(message(body())[:10]), []byte{22, 3, 1, 0, 0}), want: tlshello.ErrMalformed, msg: "empty handshake record"},

		// Size.
		{name: "too-large-message", b: cat([]byte{22, 3, 1, 0x40, 0x00, 1, 0x00, 0x44, 0x00}, make([]byte, 100)), want: tlshello.ErrTooLarge},
		{name: "too-large-header-only", b: []byte{22, 3, 1, 0, 4, 1, 0x01, 0x00, 0x00}, want: tlshello.ErrTooLarge},
		{name: "too-many-records", b: split(long, slices.Repeat([]int{100}, 200)...), want: tlshello.ErrTooLarge},

		// ClientHello fields.
		{name: "empty-body", b: record(message(nil)), want: tlshello.ErrMalformed, msg: "legacy_version takes 2 bytes, only 0 left"},
		{name: "legacy-version-2", b: record(message(cat(prelude(0x0200), v16()))), want: tlshello.ErrMalformed, msg: "legacy_version 0x0200"},
		{name: "short-random", b: record(message(cat(u16(0x0303), make([]byte, 20)))), want: tlshello.ErrMalformed, msg: "random takes 32 bytes, only 20 left"},
		{name: "long-session-id", b: record(message(cat(u16(0x0303), make([]byte, 32), v8(make([]byte, 33)), v16(u16(0x1301)), v8([]byte{0})))), want: tlshello.ErrMalformed, msg: "legacy_session_id length 33 outside 0..32"},
		{name: "no-cipher-suites", b: record(message(cat(u16(0x0303), make([]byte, 32), v8(), v16(), v8([]byte{0})))), want: tlshello.ErrMalformed, msg: "cipher_suites length 0 outside 2..65534"},
		{name: "odd-cipher-suites", b: record(message(cat(u16(0x0303), make([]byte, 32), v8(), v16([]byte{0x13, 0x01, 0x13}), v8([]byte{0})))), want: tlshello.ErrMalformed, msg: "cipher_suites: odd length 3"},
		{name: "cipher-suites-overrun", b: record(message(cat(u16(0x0303), make([]byte, 32), v8(), u16(0xfff0), make([]byte, 10)))), want: tlshello.ErrMalformed, msg: "cipher_suites length 65520 overruns the 10 bytes left"},
		{name: "no-compression-methods", b: record(message(cat(u16(0x0303), make([]byte, 32), v8(), v16(u16(0x1301)), v8()))), want: tlshello.ErrMalformed, msg: "legacy_compression_methods length 0 outside 1..255"},
		{name: "one-byte-after-compression", b: record(message(cat(prelude(0x0303), []byte{0}))), want: tlshello.ErrMalformed, msg: "extensions length takes 2 bytes, only 1 left"},
		{name: "extensions-overrun", b: record(message(cat(prelude(0x0303), u16(100), ext(23)))), want: tlshello.ErrMalformed, msg: "extensions length 100 overruns the 4 bytes left"},
		{name: "trailing-garbage-in-hello", b: record(message(cat(body(sniExt("a.example")), []byte("junk")))), want: tlshello.ErrMalformed, msg: "malformed ClientHello: bytes left over after the last field (4)"},
		{name: "extension-data-overrun", b: hello(cat(u16(23), u16(10), []byte{1})), want: tlshello.ErrMalformed, msg: "extensions: extension_data length 10 overruns the 1 bytes left"},
		{name: "half-extension-type", b: record(message(cat(prelude(0x0303), v16([]byte{0})))), want: tlshello.ErrMalformed, msg: "extension type takes 2 bytes, only 1 left"},

		// Extensions in general.
		{name: "duplicate-extension", b: hello(ext(23), ext(10, v16(u16(29))), ext(23)), want: tlshello.ErrMalformed, msg: "extension 23 appears twice"},
		{name: "duplicate-high-extension", b: hello(ext(0xff01, []byte{0}), ext(0x0a0a), ext(0xff01, []byte{0})), want: tlshello.ErrMalformed, msg: "extension 65281"},
		{name: "duplicate-sni", b: hello(sniExt("a.example"), sniExt("b.example")), want: tlshello.ErrMalformed, msg: "extension 0 (server_name) appears twice"},
		{name: "pre-shared-key-not-last", b: hello(ext(41, make([]byte, 8)), sniExt("a.example")), want: tlshello.ErrMalformed, msg: "pre_shared_key is not the last extension"},

		// server_name.
		{name: "empty-sni-extension", b: hello(ext(0)), want: tlshello.ErrMalformed, msg: "server_name: server_name_list length takes 2 bytes, only 0 left"},
		{name: "empty-server-name-list", b: hello(ext(0, v16())), want: tlshello.ErrMalformed, msg: "server_name: server_name_list length 0 outside 1..65535"},
		{name: "empty-host-name", b: hello(sniExt("")), want: tlshello.ErrMalformed, msg: "server_name: empty host_name"},
		{name: "two-host-names", b: hello(sniExt("a.example", "b.example")), want: tlshello.ErrMalformed, msg: "two names of name_type 0"},
		{name: "two-names-of-unknown-type", b: hello(ext(0, v16([]byte{5}, v16(), []byte{5}, v16()))), want: tlshello.ErrMalformed, msg: "two names of name_type 5"},
		{name: "trailing-dot", b: hello(sniExt("example.com.")), want: tlshello.ErrMalformed, msg: `"example.com." ends in a dot`},
		{name: "only-dot", b: hello(sniExt(".")), want: tlshello.ErrMalformed, msg: "ends in a dot"},
		{name: "nul-in-host-name", b: hello(sniExt("evil.com\x00.example.com")), want: tlshello.ErrMalformed, msg: "byte 0x00 at offset 8"},
		{name: "space-in-host-name", b: hello(sniExt("a b")), want: tlshello.ErrMalformed, msg: "byte 0x20 at offset 1"},
		{name: "utf8-host-name", b: hello(sniExt("bücher.example")), want: tlshello.ErrMalformed, msg: "byte 0xc3 at offset 1"},
		{name: "host-name-overruns-list", b: hello(ext(0, v16([]byte{0}, u16(20), []byte("abc")))), want: tlshello.ErrMalformed, msg: "server_name_list: host_name length 20 overruns the 3 bytes left"},
		{name: "bytes-after-server-name-list", b: hello(ext(0, v16([]byte{0}, v16([]byte("a"))), []byte{0})), want: tlshello.ErrMalformed, msg: "server_name: bytes left over after the last field (1)"},
		{name: "name-type-without-name", b: hello(ext(0, v16([]byte{0}))), want: tlshello.ErrMalformed, msg: "host_name length takes 2 bytes, only 0 left"},

		// application_layer_protocol_negotiation.
		{name: "empty-alpn-extension", b: hello(ext(16)), want: tlshello.ErrMalformed, msg: "protocol_name_list length takes 2 bytes"},
		{name: "empty-protocol-name-list", b: hello(ext(16, v16())), want: tlshello.ErrMalformed, msg: "application_layer_protocol_negotiation: protocol_name_list length 0 outside 2..65535"},
		{name: "empty-protocol-name", b: hello(alpnExt("h2", "")), want: tlshello.ErrMalformed, msg: "empty protocol name"},
		{name: "protocol-name-overruns", b: hello(ext(16, v16([]byte{9}, []byte("h2")))), want: tlshello.ErrMalformed, msg: "protocol_name_list: protocol name length 9 overruns the 2 bytes left"},
		{name: "bytes-after-protocol-name-list", b: hello(ext(16, v16(v8([]byte("h2"))), []byte{1, 2})), want: tlshello.ErrMalformed, msg: "application_layer_protocol_negotiation: bytes left over"},

		// supported_versions.
		{name: "empty-versions", b: hello(ext(43, v8())), want: tlshello.ErrMalformed, msg: "supported_versions: versions length 0 outside 2..254"},
		{name: "odd-versions", b: hello(ext(43, v8([]byte{3, 4, 3}))), want: tlshello.ErrMalformed, msg: "supported_versions: odd length 3"},
		{name: "versions-overrun", b: hello(ext(43, []byte{6, 3, 4})), want: tlshello.ErrMalformed, msg: "supported_versions: versions length 6 overruns the 2 bytes left"},
		{name: "bytes-after-versions", b: hello(ext(43, v8(u16(0x0304)), []byte{0})), want: tlshello.ErrMalformed, msg: "supported_versions: bytes left over"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h tlshello.ClientHello
			require.NoError(t, h.Parse(hello(sniExt("before.example"), alpnExt("h2"))))
			err := h.Parse(tc.b)
			require.ErrorIs(t, err, tc.want)
			require.ErrorContains(t, err, tc.msg)
			require.Equal(t, fields{}, fieldsOf(&h), "fields left set after an error")
			for _, tail := range [][]byte{{0}, hello(), bytes.Repeat([]byte{22, 3, 1, 0, 1, 1}, 10)} {
				require.ErrorIs(t, h.Parse(cat(tc.b, tail)), tc.want, "the verdict changed when more bytes arrived")
			}
		})
	}
}

// Short input asks for more, until a byte shows it is not a ClientHello.
func TestNeedMore(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
	}{
		{name: "nil"},
		{name: "empty", b: []byte{}},
		{name: "type", b: []byte{22}},
		{name: "type-version", b: []byte{22, 3}},
		{name: "record-header", b: []byte{22, 3, 1, 0, 200}},
		{name: "handshake-type", b: []byte{22, 3, 1, 0, 200, 1}},
		{name: "handshake-header", b: []byte{22, 3, 1, 0, 200, 1, 0, 0, 196}},
		{name: "first-of-two-records", b: split(message(body(sniExt("a.example"))), 30)[:35]},
		{name: "into-second-record", b: split(message(body(sniExt("a.example"))), 30)[:40]},
		{name: "skipped-extension-incomplete", b: hello(ext(0xfe0d, make([]byte, 1000)))[:500]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.b)
			require.ErrorIs(t, err, tlshello.ErrNeedMore)
			require.Equal(t, tlshello.ErrNeedMore, err, "ErrNeedMore comes unwrapped")
		})
	}
}

// An incomplete hello that is already wrong is refused at once: the
// caller need not read more to find out.
func TestMalformedPrefix(t *testing.T) {
	b := hello(sniExt("a.example."), ext(0xfe0d, make([]byte, 1000)))
	_, err := parse(b[:200])
	require.ErrorIs(t, err, tlshello.ErrMalformed)
	require.ErrorContains(t, err, "ends in a dot")

	b = split(message(body(sniExt(""), ext(0xfe0d, make([]byte, 1000)))), 60)
	_, err = parse(b[:100])
	require.ErrorIs(t, err, tlshello.ErrMalformed)
}

// A reused ClientHello reports only the latest hello, and its strings do
// not change when a later hello is parsed.
func TestReuse(t *testing.T) {
	var h tlshello.ClientHello
	require.NoError(t, h.Parse(hello(sniExt("one.example"), alpnExt("h2", "custom/1"), versionsExt(0x0304))))
	name, alpn1 := h.ServerName, h.ALPN[1]
	require.NoError(t, h.Parse(hello(sniExt("two.example"), alpnExt("other"))))
	require.Equal(t, "two.example", h.ServerName)
	require.Equal(t, []string{"other"}, h.ALPN)
	require.Empty(t, h.SupportedVersions)
	require.Equal(t, "one.example", name)
	require.Equal(t, "custom/1", alpn1)
	require.NoError(t, h.Parse(hello()))
	require.Equal(t, "", h.ServerName)
	require.Empty(t, h.ALPN)
}

// Parsing a common hello with a reused ClientHello does not allocate: not
// when the hello is in one record, nor when it spans several.
func TestAllocs(t *testing.T) {
	for _, g := range goHellos(t) {
		if g.name != "alpn" && g.name != "tls13-resumed" {
			continue
		}
		var h tlshello.ClientHello
		raw := g.raw
		require.NoError(t, h.Parse(raw))
		splitRaw := split(fragments(raw[:h.Len]), 100, 100)
		require.NoError(t, h.Parse(splitRaw))
		for _, b := range [][]byte{raw, splitRaw} {
			allocs := testing.AllocsPerRun(100, func() {
				if err := h.Parse(b); err != nil {
					t.Fatal(err)
				}
			})
			require.Zero(t, allocs, g.name)
		}
	}
}
