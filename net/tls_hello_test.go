package net

import (
	"crypto/tls"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTLSFirstRecordCut: the transport hands a large first record (a
// ClientHello with the post-quantum hybrid key share, 1.5 KB, or one
// padded far beyond by ALPN names) to crypto/tls cut into smaller
// handshake records, which must change nothing the peers see: the
// handshake completes with the share the client offered, and data flows,
// whether the ClientHello arrives at once or a byte at a time (the cut
// waits for the whole record). A short ClientHello is passed on as it is.
func TestTLSFirstRecordCut(t *testing.T) {
	many := make([]string, 120)
	for i := range many {
		many[i] = "protocol-name-" + strings.Repeat("x", 30) + strconv.Itoa(i)
	}
	tests := []struct {
		name       string
		curves     []tls.CurveID
		protos     []string
		byteByByte bool
		want       tls.CurveID
	}{
		{"x25519, not cut", []tls.CurveID{tls.X25519}, nil, false, tls.X25519},
		{"hybrid", nil, nil, false, tls.X25519MLKEM768},
		{"hybrid and 120 ALPN names", nil, many, false, tls.X25519MLKEM768},
		{"hybrid, a byte at a time", nil, nil, true, tls.X25519MLKEM768},
	}
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		s := startTLS(t, b, place, echoHandler(), nil, WithLoops(1))
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				raw, err := net.Dial("tcp", s.Addr().String())
				require.NoError(t, err)
				defer raw.Close()
				raw.SetDeadline(time.Now().Add(30 * time.Second))
				sc := &splitConn{Conn: raw, t: t, s: s, armed: tt.byteByByte}
				cfg := testCert().ClientConfig("localhost")
				cfg.CurvePreferences = tt.curves
				cfg.NextProtos = tt.protos
				c := tls.Client(sc, cfg)
				require.NoError(t, c.Handshake())
				sc.armed = false
				require.Equal(t, tt.want, c.ConnectionState().CurveID)
				requireEchoes(t, c, "hello", strings.Repeat("a longer record ", 100))
			})
		}
	})
}

// TestTLSSplitFirst checks the cut itself: a plaintext handshake record
// over tlsPieceOver bytes, whole in the buffer, becomes records of at most
// tlsPiece bytes with the same type and version whose payloads join into
// the original, followed by whatever came after it; anything else is left
// as it is.
func TestTLSSplitFirst(t *testing.T) {
	record := func(typ byte, n int) []byte {
		r := []byte{typ, 3, 1, byte(n >> 8), byte(n)}
		for i := 0; i < n; i++ {
			r = append(r, byte(i))
		}
		return r
	}
	tail := []byte{20, 3, 3, 0, 1, 1} // a ChangeCipherSpec after it
	tests := []struct {
		name   string
		in     []byte
		pieces int // 0: left as it is
	}{
		{"short ClientHello", record(22, 300), 0},
		{"at the limit", record(22, tlsPieceOver), 0},
		{"just over", record(22, tlsPieceOver+1), 2},
		{"hybrid ClientHello", record(22, 1500), 4},
		{"followed by another record", append(record(22, 1500), tail...), 4},
		{"largest record", record(22, tlsMaxRecord), (tlsMaxRecord + tlsPiece - 1) / tlsPiece},
		{"over the record limit", record(22, tlsMaxRecord+1), 0},
		{"not a handshake record", record(23, 1500), 0},
		{"not all here", record(22, 1500)[:900], 0},
		{"header not all here", []byte{22, 3}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &tlsHandshake{raw: append([]byte(nil), tt.in...)}
			tr.splitFirst()
			require.True(t, tr.firstSeen)
			if tt.pieces == 0 {
				require.Equal(t, tt.in, tr.raw)
				return
			}
			n := int(tt.in[3])<<8 | int(tt.in[4])
			var payload []byte
			rest := tr.raw
			for i := 0; i < tt.pieces; i++ {
				require.GreaterOrEqual(t, len(rest), 5)
				require.Equal(t, tt.in[:3], rest[:3], "piece %d's type and version", i)
				k := int(rest[3])<<8 | int(rest[4])
				require.True(t, k > 0 && k <= tlsPiece, "piece %d of %d bytes", i, k)
				payload = append(payload, rest[5:5+k]...)
				rest = rest[5+k:]
			}
			require.Equal(t, tt.in[5:5+n], payload)
			require.Equal(t, tt.in[5+n:], rest)
		})
	}
}
