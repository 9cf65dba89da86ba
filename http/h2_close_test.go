package http

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/http/internal/h2"
	vnet "github.com/veloq/veloq/net"
)

// A frame other than HEADERS or PRIORITY on an idle stream is a
// connection error PROTOCOL_ERROR (RFC 9113 §5.1), an even stream below
// the highest the client opened included (the server pushes none, so
// every even stream is idle): it used to get RST_STREAM STREAM_CLOSED. A
// closed stream still gets STREAM_CLOSED.
func TestHTTP2FrameOnIdleEvenStream(t *testing.T) {
	frames := map[string][]byte{
		"DATA":          h2.AppendData(nil, 2, false, []byte("x")),
		"WINDOW_UPDATE": h2.AppendWindowUpdate(nil, 2, 1),
		"RST_STREAM":    h2.AppendRSTStream(nil, 2, h2.Cancel),
	}
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithLoops(1))
		for name, f := range frames {
			t.Run(name, func(t *testing.T) {
				r := dialH2(t, s.Addr().String())
				r.dead = time.Now().Add(5 * time.Second)
				require.NoError(t, r.write(r.get(3, "/")))
				require.Equal(t, 200, r.status(3))
				require.NoError(t, r.write(f))
				require.Equal(t, h2.ProtocolError, r.goAway())
			})
		}
		t.Run("closed stream", func(t *testing.T) {
			r := dialH2(t, s.Addr().String())
			r.dead = time.Now().Add(5 * time.Second)
			require.NoError(t, r.write(r.get(3, "/")))
			require.Equal(t, 200, r.status(3))
			require.NoError(t, r.write(h2.AppendData(nil, 3, false, []byte("x"))))
			for {
				h, p, ok := r.next()
				require.True(t, ok, "connection closed")
				require.NotEqual(t, h2.TypeGoAway, h.Type)
				if h.Type == h2.TypeRSTStream {
					code, err := h2.ParseRSTStream(h, p)
					require.NoError(t, err)
					require.Equal(t, uint32(3), h.Stream)
					require.Equal(t, h2.StreamClosed, code)
					return
				}
			}
		})
	})
}

// The read-body timeout says GOAWAY NO_ERROR, with the last stream the
// client opened, before it closes the connection; it used to close
// without one.
func TestHTTP2BodyTimeoutGoAway(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithLoops(1), WithReadBodyTimeout(200*time.Millisecond))
		r := dialH2(t, s.Addr().String())
		r.dead = time.Now().Add(5 * time.Second)
		require.NoError(t, r.write(h2.AppendHeaders(nil, 3, false, r.block("POST", "/echo"), h2.MinMaxFrameSize)))
		for {
			h, p, ok := r.next()
			require.True(t, ok, "connection closed without GOAWAY")
			if h.Type == h2.TypeGoAway {
				last, code, _, err := h2.ParseGoAway(h, p)
				require.NoError(t, err)
				require.Equal(t, h2.NoError, code)
				require.Equal(t, uint32(3), last)
				break
			}
		}
		_, _, ok := r.next()
		require.False(t, ok, "the connection closes after the GOAWAY")
		require.Equal(t, uint64(1), s.Stats().Timeouts)
	})
}
