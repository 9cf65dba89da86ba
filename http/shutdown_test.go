package http

import (
	"context"
	"errors"
	"io"
	nethttp "net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/http/internal/h2"
	vnet "github.com/veloq/veloq/net"
)

// slowStd answers "/slow" once release is closed (announcing each start
// on started) and everything else at once: a handler still running when
// Shutdown starts.
func slowStd(started chan<- string, release <-chan struct{}) Handler {
	return FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.URL.Path == "/slow" {
			started <- r.URL.Path
			<-release
		}
		_, _ = io.WriteString(w, "done "+r.URL.Path)
	}))
}

// HTTP/1.1 during Shutdown: a keep-alive client in the middle of its
// sequence gets its answer with "Connection: close" and then EOF, no
// request lost; an idle keep-alive connection is closed at once; a
// request whose head is being read is answered (with "Connection:
// close"); a request that never finishes is cut at the deadline. Stats
// counts the first three as drained, the last as cut.
func TestShutdownHTTP1Drain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		started := make(chan string, 2)
		release, never := make(chan struct{}), make(chan struct{})
		defer close(never)
		h := FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			switch r.URL.Path {
			case "/slow":
				started <- r.URL.Path
				<-release
			case "/never":
				started <- r.URL.Path
				<-never
			}
			_, _ = io.WriteString(w, "done "+r.URL.Path)
		}))
		s := newServer(t, h, WithNetOptions(vnet.WithBackend(b)), WithNetOptions(vnet.WithLoops(2)), WithLogger(testLogger(t)))
		_, err := s.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)

		idle, ibr := rawConn(t, s)
		busy, bbr := rawConn(t, s)
		stuck, sbr := rawConn(t, s)
		for _, c := range []io.Writer{idle, busy} {
			_, err := io.WriteString(c, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
			require.NoError(t, err)
		}
		resp, body := readResponse(t, ibr, "GET")
		require.Equal(t, "done /first", body)
		require.False(t, resp.Close)
		resp, body = readResponse(t, bbr, "GET")
		require.Equal(t, "done /first", body)
		require.False(t, resp.Close)
		// Mid-sequence: the next request is being served when Shutdown starts.
		_, err = io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		require.Equal(t, "/slow", <-started)
		_, err = io.WriteString(stuck, "GET /never HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		require.Equal(t, "/never", <-started)

		// A request being read when Shutdown starts: the loop has its
		// first bytes (every byte sent so far is counted in).
		partial, pbr := rawConn(t, s)
		const head1, head2 = "GET /first HTTP/1.1\r\nHo", "st: x\r\n\r\n"
		_, err = io.WriteString(partial, head1)
		require.NoError(t, err)
		sent := uint64(2*len("GET /first HTTP/1.1\r\nHost: x\r\n\r\n") + len("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n") +
			len("GET /never HTTP/1.1\r\nHost: x\r\n\r\n") + len(head1))
		require.Eventually(t, func() bool {
			n := uint64(0)
			for _, st := range s.NetServer().Stats() {
				n += st.BytesIn
			}
			return n == sent
		}, 10*time.Second, time.Millisecond)

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		shut := make(chan error, 1)
		go func() { shut <- s.Shutdown(ctx) }()
		expectClosed(t, idle, ibr) // at once: its only request was answered
		_, err = io.WriteString(partial, head2)
		require.NoError(t, err)
		resp, body = readResponse(t, pbr, "GET")
		require.Equal(t, "done /first", body)
		require.True(t, resp.Close)
		expectClosed(t, partial, pbr)
		close(release)
		resp, body = readResponse(t, bbr, "GET")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "done /slow", body)
		require.True(t, resp.Close, "no Connection: close on the answer after Shutdown began")
		expectClosed(t, busy, bbr)
		require.Eventually(t, func() bool { return s.Stats().Drained == 3 }, 10*time.Second, time.Millisecond)
		select {
		case err := <-shut:
			t.Fatalf("Shutdown returned %v with a request in progress", err)
		default:
		}
		cancel() // the drain timeout
		require.ErrorIs(t, <-shut, context.Canceled)
		_, _ = io.ReadAll(sbr) // EOF or a reset: cut
		st := s.Stats()
		require.EqualValues(t, 3, st.Drained)
		require.EqualValues(t, 1, st.Cut)
	})
}

// HTTP/2 during Shutdown (RFC 9113 §6.8): a first GOAWAY with the largest
// stream id and a PING; a stream the client opens before acking it is
// still served; after the ack, the final GOAWAY names the last stream
// opened, and a later stream is not processed; the stream in flight when
// Shutdown began completes, then the connection closes.
func TestShutdownHTTP2TwoGoAways(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		started, release := make(chan string, 1), make(chan struct{})
		s := newServer(t, slowStd(started, release), WithNetOptions(vnet.WithBackend(b)), WithNetOptions(vnet.WithLoops(1)), WithLogger(testLogger(t)))
		_, err := s.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		r := dialH2(t, s.Addr().String())
		require.NoError(t, r.write(r.get(1, "/slow")))
		<-started

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shut := make(chan error, 1)
		go func() { shut <- s.Shutdown(ctx) }()

		// The first GOAWAY, then the PING.
		var ping [8]byte
		for gotGoAway := false; ; {
			h, p, ok := r.next()
			require.True(t, ok, "closed before the PING")
			if h.Type == h2.TypeGoAway {
				last, code, _, err := h2.ParseGoAway(h, p)
				require.NoError(t, err)
				require.Equal(t, h2.NoError, code)
				require.Equal(t, uint32(1<<31-1), last, "the first GOAWAY names the largest stream id")
				gotGoAway = true
			}
			if h.Type == h2.TypePing && !h.Flags.Has(h2.FlagAck) {
				require.True(t, gotGoAway, "PING before the GOAWAY")
				ping, err = h2.ParsePing(h, p)
				require.NoError(t, err)
				break
			}
		}
		// A stream sent before the client saw the GOAWAY is processed.
		require.NoError(t, r.write(r.get(3, "/fast")))
		require.Equal(t, 200, r.status(3))
		require.NoError(t, r.write(h2.AppendPing(nil, true, ping)))
		for {
			h, p, ok := r.next()
			require.True(t, ok, "closed before the final GOAWAY")
			if h.Type == h2.TypeGoAway {
				last, _, _, err := h2.ParseGoAway(h, p)
				require.NoError(t, err)
				require.Equal(t, uint32(3), last, "the final GOAWAY names the last stream opened")
				break
			}
		}
		require.NoError(t, r.write(r.get(5, "/fast"))) // after the GOAWAY: ignored
		close(release)
		require.Equal(t, 200, r.status(1), "the stream in flight completes")
		for {
			h, _, ok := r.next()
			if !ok {
				break
			}
			require.False(t, h.Type == h2.TypeHeaders && h.Stream == 5, "stream 5 was processed after the final GOAWAY")
		}
		require.True(t, errors.Is(r.end, io.EOF), "ended by %v", r.end)
		require.NoError(t, <-shut)
		st := s.Stats()
		require.EqualValues(t, 1, st.Drained)
		require.Zero(t, st.Cut)
	})
}
