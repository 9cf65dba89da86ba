package http

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// One client pipelines requests for a large answer and reads nothing until
// it has sent them all. The server answers while the connection's output
// is below the high-water mark and then waits for it to drain, so the
// connection holds about the mark plus one response at most, however many
// requests it pipelines; every answer arrives, in order. Answering every
// buffered request at once held 170–293 MiB for 1,000 such requests.
func TestPipelinedLargeAnswersWaitForDrain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		const n, size = 100, 256 << 10
		body := bytes.Repeat([]byte("x"), size)
		s := startServer(t, b, HandlerFunc(func(w *ResponseWriter, r *Request) {
			w.Header().SetBytes([]byte("X-Path"), r.Path)
			w.Write(body)
		}), WithNetOptions(vnet.WithLoops(1)))
		c, br := rawConn(t, s)
		var burst []byte
		for i := range n {
			burst = fmt.Appendf(burst, "GET /%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
		}
		_, err := c.Write(burst)
		require.NoError(t, err)
		for i := range n {
			resp, got := readResponse(t, br, "GET")
			require.Equal(t, "/"+strconv.Itoa(i), resp.Header.Get("X-Path"), "answers out of order")
			require.Len(t, got, size)
		}
		peak := s.NetServer().Stats()[0].PeakConnOutput
		t.Logf("%s: peak pending output of the connection: %d KiB", b, peak>>10)
		require.LessOrEqual(t, peak, int64(64<<10+size+4<<10), "pipelined answers were queued beyond the high-water mark")
	})
}

// A connection that never sends a byte is closed at the head timeout,
// counted from the accept (net/http's ReadHeaderTimeout), not kept for
// the idle timeout.
func TestSilentConnectionClosedAtHeadTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler),
			WithReadHeaderTimeout(200*time.Millisecond), WithNextRequestTimeout(time.Minute))
		c, br := rawConn(t, s)
		expectClosed(t, c, br) // within its 5 s read deadline, far below the minute
		require.Eventually(t, func() bool { return s.Stats().Timeouts == 1 }, 5*time.Second, 5*time.Millisecond)

		// The first request's head timeout also runs from the accept: a
		// connection silent for most of it has only the rest for its head.
		c2, br2 := rawConn(t, s)
		io.WriteString(c2, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, _ := readResponse(t, br2, "GET")
		require.Equal(t, 200, resp.StatusCode)
	})
}

// Thousands of silent connections opened together reach the head timeout
// together: every one is closed and counted, and a client making
// requests on the same loop meanwhile gets every answer (the loop runs a
// budget of timers per iteration and dispatches I/O in between; see
// bench/cmd/masstimeout for the stall it saw).
func TestSilentConnectionsClosedTogether(t *testing.T) {
	const silent = 2000
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithNetOptions(vnet.WithLoops(1)),
			WithReadHeaderTimeout(300*time.Millisecond), WithNextRequestTimeout(time.Minute))
		live, liveBr := rawConn(t, s)
		get := func() {
			live.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(live, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, _ := readResponse(t, liveBr, "GET")
			require.Equal(t, 200, resp.StatusCode)
		}
		get() // before its own head timeout: from here on it is idle between requests
		type raw struct {
			c  net.Conn
			br *bufio.Reader
		}
		conns := make([]raw, silent)
		for i := range conns {
			conns[i].c, conns[i].br = rawConn(t, s)
		}
		for end := time.Now().Add(30 * time.Second); s.Stats().Timeouts < silent; get() {
			require.True(t, time.Now().Before(end), "%d of %d timed out", s.Stats().Timeouts, silent)
		}
		for _, r := range conns {
			expectClosed(t, r.c, r.br)
		}
		require.Equal(t, uint64(silent), s.Stats().Timeouts)
	})
}

// A body trickled a byte at a time restarts the read-body timeout with
// every byte; the minimum body rate ends it after its grace period, for
// fast and FromStd handlers alike.
func TestTrickledBodyEndedByMinRate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for _, tc := range []struct {
			name string
			h    Handler
		}{
			{"fast", HandlerFunc(testHandler)},
			{"std", FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
				if _, err := io.Copy(io.Discard, r.Body); errors.Is(err, ErrBodyReadTimeout) {
					w.WriteHeader(StatusRequestTimeout)
				}
			}))},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s := startServer(t, b, tc.h, WithReadBodyTimeout(time.Minute),
					WithMinBodyRate(1000, 300*time.Millisecond))
				c, br := rawConn(t, s)
				io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
				stop := make(chan struct{})
				defer close(stop)
				go func() {
					// 50 B/s, far below the rate, and far more often than
					// the read-body timeout.
					tick := time.NewTicker(20 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							if _, err := io.WriteString(c, "x"); err != nil {
								return
							}
						}
					}
				}()
				resp, _ := readResponse(t, br, "POST")
				require.Equal(t, StatusRequestTimeout, resp.StatusCode)
				require.Eventually(t, func() bool { return s.Stats().Timeouts == 1 }, 5*time.Second, 5*time.Millisecond)
			})
		}
	})
}
