package websocket

import (
	"bytes"
	"compress/flate"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// deflateRaw compresses p as a permessage-deflate sender does: deflate,
// sync flush, trailing 00 00 FF FF removed. It uses compress/flate
// directly, independently of the package's pooled compressor.
func deflateRaw(t testing.TB, p []byte) []byte {
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.DefaultCompression)
	require.NoError(t, err)
	w.Write(p)
	require.NoError(t, w.Flush())
	b := buf.Bytes()
	require.True(t, bytes.HasSuffix(b, []byte{0, 0, 0xff, 0xff}))
	return b[:len(b)-4]
}

// inflateRaw undoes a permessage-deflate payload with compress/flate.
func inflateRaw(t testing.TB, p []byte) []byte {
	r := flate.NewReader(io.MultiReader(bytes.NewReader(p), bytes.NewReader([]byte{0, 0, 0xff, 0xff, 1, 0, 0, 0xff, 0xff})))
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	return out
}

func TestFlatePoolsRoundTrip(t *testing.T) {
	var fp flatePools
	for _, msg := range [][]byte{nil, []byte("a"), bytes.Repeat([]byte("compress me "), 5000)} {
		z := fp.compress(nil, msg)
		require.Equal(t, msg, nonNil(inflateRaw(t, z)))
		out, err := fp.inflate(nil, deflateRaw(t, msg), 0)
		require.NoError(t, err)
		require.Equal(t, msg, nonNil(out))
	}
	big := bytes.Repeat([]byte{'z'}, 100000)
	_, err := fp.inflate(nil, deflateRaw(t, big), 99999)
	require.ErrorIs(t, err, errMessageTooBig)
	_, err = fp.inflate(nil, []byte{0xff, 0xff, 0xff}, 0)
	require.ErrorIs(t, err, errBadCompressed)
}

func nonNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func TestDeflateNegotiation(t *testing.T) {
	for _, tc := range []struct {
		offer string
		ok    bool
	}{
		{"permessage-deflate", true},
		{"permessage-deflate; client_max_window_bits", true},
		{"permessage-deflate; client_max_window_bits=10; server_no_context_takeover", true},
		{"permessage-deflate; server_max_window_bits=15", true},
		{`permessage-deflate; server_max_window_bits="15"`, true},
		{"permessage-deflate; server_max_window_bits=10", false},
		{"permessage-deflate; client_max_window_bits=16", false},
		{"permessage-deflate; unknown_param", false},
		{"permessage-deflate; client_no_context_takeover; client_no_context_takeover", false},
		{"x-webkit-deflate-frame", false},
		{"permessage-deflate; server_max_window_bits=10, permessage-deflate", true}, // the fallback offer
	} {
		ok := false
		for list := []byte(tc.offer); len(list) > 0; {
			var ext []byte
			ext, list = nextElem(list, ',')
			if deflateOfferOK(ext) {
				ok = true
				break
			}
		}
		require.Equal(t, tc.ok, ok, tc.offer)
	}
}

// permessage-deflate end to end: compressed messages from the client are
// inflated (also fragmented ones, with RSV1 on the first frame only), and
// the echo of a large message comes back compressed.
func TestDeflateOverSockets(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		ev := &events{}
		srv, _ := startWS(t, b, echoHandler(ev), WithCompression(true, 64))
		addr := srv.Addr().String()
		c := dialWS(t, addr, "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits")
		require.Contains(t, c.resp, "\r\nSec-WebSocket-Extensions: "+deflateResponse+"\r\n")

		long := strings.Repeat("the quick brown fox jumps over the lazy dog. ", 200)
		z := deflateRaw(t, []byte(long))
		c.write(mustMasked(OpText, true, Rsv1, z))
		f := c.mustRead()
		require.Equal(t, OpText, f.op)
		require.Less(t, len(f.payload), len(long)/4, "a long repetitive echo is compressed")
		require.Equal(t, long, string(inflateRaw(t, f.payload)))

		// Fragmented compressed message: RSV1 only on the first frame.
		half := len(z) / 2
		c.write(mustMasked(OpText, false, Rsv1, z[:half]))
		c.write(mustMasked(OpContinuation, true, 0, z[half:]))
		f = c.mustRead()
		require.Equal(t, long, string(inflateRaw(t, f.payload)))

		// Short messages go uncompressed, and uncompressed input is fine.
		c.send(OpText, true, []byte("short"))
		f = c.mustRead()
		require.Equal(t, "short", string(f.payload))

		// RSV1 on a continuation frame is still a protocol error.
		c.write(mustMasked(OpText, false, 0, []byte("a")))
		c.write(mustMasked(OpContinuation, true, Rsv1, []byte("b")))
		c.expectClose(StatusProtocolError)

		// Compressed invalid UTF-8 text: 1007 after inflating.
		c = dialWS(t, addr, "Sec-WebSocket-Extensions: permessage-deflate")
		c.write(mustMasked(OpText, true, Rsv1, deflateRaw(t, []byte("ok \xff"))))
		c.expectClose(StatusInvalidPayload)

		// Garbage that does not inflate: 1007.
		c = dialWS(t, addr, "Sec-WebSocket-Extensions: permessage-deflate")
		c.write(mustMasked(OpBinary, true, Rsv1, []byte{0xff, 0xff, 0xff, 0xff}))
		c.expectClose(StatusInvalidPayload)

		// A small compressed message that inflates past the limit: 1009.
		c = dialWS(t, addr, "Sec-WebSocket-Extensions: permessage-deflate")
		bomb := deflateRaw(t, make([]byte, 5<<20)) // a few KiB for 5 MiB of zeros
		require.Less(t, len(bomb), 64<<10)
		c.write(mustMasked(OpBinary, true, Rsv1, bomb))
		c.expectClose(StatusMessageTooBig)

		// Without the offer, RSV1 stays forbidden.
		c = dialWS(t, addr)
		require.NotContains(t, c.resp, "Sec-WebSocket-Extensions")
		c.write(mustMasked(OpText, true, Rsv1, z))
		c.expectClose(StatusProtocolError)
	})
}

// The pools the Upgrader owns are shared by its connections; this checks
// that a message's buffers go back (and so an idle connection keeps none).
func TestIdleConnHoldsNoBuffers(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		ev := &events{}
		srv, u := startWS(t, b, echoHandler(ev), WithCompression(true, 64))
		c := dialWS(t, srv.Addr().String(), "Sec-WebSocket-Extensions: permessage-deflate")
		long := strings.Repeat("abc", 1000)
		c.write(mustMasked(OpText, false, Rsv1, deflateRaw(t, []byte(long))))
		c.write(mustMasked(OpContinuation, true, 0, nil))
		require.Equal(t, long, string(inflateRaw(t, c.mustRead().payload)))
		c.send(OpBinary, false, []byte("frag"))
		c.send(OpContinuation, true, []byte("mented"))
		require.Equal(t, "fragmented", string(c.mustRead().payload))
		require.Eventually(t, func() bool {
			ev.mu.Lock()
			defer ev.mu.Unlock()
			return len(ev.conns) == 1
		}, 5*time.Second, time.Millisecond)
		conn := ev.conns[0]
		held := make(chan []byte, 1)
		conn.Loop().Post(func() { held <- conn.msg })
		require.Nil(t, <-held, "the assembly buffer is released after each message")
		st := u.pool.Stats()
		require.Equal(t, st.Gets, st.Puts, "every buffer taken for a message went back: %+v", st)
	})
}
