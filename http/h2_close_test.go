package http

import (
	"io"
	"net"
	nethttp "net/http"
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
		s := startServer(t, b, HandlerFunc(testHandler), WithNetOptions(vnet.WithLoops(1)))
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

// h2UntilClose reads the server's frames until it closes, and returns
// them by type.
func h2UntilClose(r *rawH2) map[h2.Type][]h2.Header {
	got := map[h2.Type][]h2.Header{}
	for {
		h, _, ok := r.next()
		if !ok {
			return got
		}
		got[h.Type] = append(got[h.Type], h)
	}
}

// A client that half-closes (FIN) while a stream waits for its request
// body ends the connection at once: that stream can never complete, so
// it is reset, the answer of a complete stream still goes out, then
// GOAWAY and close. The server used to hold the connection until the
// read-body timeout (60 s by default; the test allows 5).
func TestHTTP2FINWhileBodyPending(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithNetOptions(vnet.WithLoops(1)))
		r := dialH2(t, s.Addr().String())
		r.dead = time.Now().Add(5 * time.Second)
		out := h2.AppendHeaders(nil, 1, false, r.block("POST", "/echo"), h2.MinMaxFrameSize)
		out = h2.AppendData(out, 1, false, []byte("half a body"))
		out = append(out, r.get(3, "/")...)
		require.NoError(t, r.write(out))
		require.NoError(t, r.c.(*net.TCPConn).CloseWrite())
		got := h2UntilClose(r)
		require.Len(t, got[h2.TypeGoAway], 1)
		require.Len(t, got[h2.TypeRSTStream], 1)
		require.Equal(t, uint32(1), got[h2.TypeRSTStream][0].Stream)
		require.Len(t, got[h2.TypeHeaders], 1, "stream 3 is answered")
		require.Equal(t, uint32(3), got[h2.TypeHeaders][0].Stream)
	})
}

// The same with a FromStd handler reading the body: its read fails and
// its context is canceled, and the connection closes after its answer.
func TestHTTP2FINWhileBodyPendingFromStd(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		readErr := make(chan error, 1)
		h := FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			_, err := io.ReadAll(r.Body)
			<-r.Context().Done()
			readErr <- err
			w.WriteHeader(StatusBadRequest)
		}))
		s := startServer(t, b, h, WithNetOptions(vnet.WithLoops(1)))
		r := dialH2(t, s.Addr().String())
		r.dead = time.Now().Add(5 * time.Second)
		out := h2.AppendHeaders(nil, 1, false, r.block("POST", "/echo"), h2.MinMaxFrameSize)
		out = h2.AppendData(out, 1, false, []byte("half a body"))
		require.NoError(t, r.write(out))
		require.NoError(t, r.c.(*net.TCPConn).CloseWrite())
		got := h2UntilClose(r)
		require.Len(t, got[h2.TypeGoAway], 1)
		select {
		case err := <-readErr:
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		case <-time.After(5 * time.Second):
			t.Fatal("the handler's body read did not end")
		}
	})
}

// The read-body timeout says GOAWAY NO_ERROR, with the last stream the
// client opened, before it closes the connection; it used to close
// without one.
func TestHTTP2BodyTimeoutGoAway(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithNetOptions(vnet.WithLoops(1)), WithReadBodyTimeout(200*time.Millisecond))
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

// An answer that waits for the client's flow-control window when the
// client half-closes is reset, as no WINDOW_UPDATE can come after the
// FIN: the stream used to hold the connection open for good (no timeout
// runs while only the client's window is awaited).
func TestHTTP2FINWhileAnswerAwaitsWindow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithNetOptions(vnet.WithLoops(1)))
		r := dialH2(t, s.Addr().String(), h2.Setting{ID: h2.SettingInitialWindowSize, Val: 0})
		r.dead = time.Now().Add(5 * time.Second)
		require.NoError(t, r.write(r.get(1, "/")))
		require.Equal(t, 200, r.status(1))
		require.NoError(t, r.c.(*net.TCPConn).CloseWrite())
		got := h2UntilClose(r)
		require.Len(t, got[h2.TypeRSTStream], 1)
		require.Len(t, got[h2.TypeGoAway], 1)
		require.Empty(t, got[h2.TypeData])
		require.Eventually(t, func() bool { return s.Stats().Conns == 0 }, 5*time.Second, 5*time.Millisecond)
	})
}
