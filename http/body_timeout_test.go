package http

import (
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// A fast handler's request whose body stops arriving is answered with 408
// and closed after the read-body timeout, Content-Length or chunked.
func TestServerBodyTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithReadBodyTimeout(200*time.Millisecond))
		for _, head := range []string{
			"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc",
			"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc",
		} {
			c, br := rawConn(t, s)
			io.WriteString(c, head)
			resp, _ := readResponse(t, br, "POST")
			require.Equal(t, StatusRequestTimeout, resp.StatusCode)
			expectClosed(t, c, br)
		}
		require.Eventually(t, func() bool { return s.Stats().Timeouts == 2 }, 5*time.Second, 5*time.Millisecond)
	})
}

// The timeout is between arrivals, like nginx's client_body_timeout: a
// body that keeps coming, slowly, is served even when it takes longer
// than the timeout overall.
func TestServerBodyTimeoutRestartsOnProgress(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for _, h := range []Handler{HandlerFunc(testHandler), FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			io.Copy(w, r.Body)
		}))} {
			// Each gap is a quarter of the timeout (room for a loaded
			// machine's late wake-ups: at 100 ms of 300 ms a run with
			// the load average at 16 saw its timeout fire), the whole
			// body 2.5 times it.
			s := startServer(t, b, h, WithReadBodyTimeout(600*time.Millisecond))
			c, br := rawConn(t, s)
			io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
			for i := range 10 {
				time.Sleep(150 * time.Millisecond) // the client's pace, 1.5 s in all
				fmt.Fprint(c, i)
			}
			resp, body := readResponse(t, br, "POST")
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, "0123456789", body)
		}
	})
}

// A FromStd handler reading a stalled body gets ErrBodyReadTimeout (an
// os.ErrDeadlineExceeded); its response goes out and the connection
// closes.
func TestFromStdBodyTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		readErr := make(chan error, 1)
		h := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			_, err := io.ReadAll(r.Body)
			readErr <- err
			w.WriteHeader(StatusRequestTimeout)
		})
		s := startServer(t, b, FromStd(h), WithReadBodyTimeout(200*time.Millisecond))
		c, br := rawConn(t, s)
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
		err := <-readErr
		require.ErrorIs(t, err, ErrBodyReadTimeout)
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		resp, _ := readResponse(t, br, "POST")
		require.Equal(t, StatusRequestTimeout, resp.StatusCode)
		expectClosed(t, c, br)
	})
}

// A FromStd handler that is slow to read is not the client's fault: the
// body timeout does not run while the loop waits for the handler.
func TestFromStdBodyTimeoutNotWhileHandlerSlow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		release := make(chan struct{})
		h := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			<-release
			n, err := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "%d %v", n, err)
		})
		s := startServer(t, b, FromStd(h), WithReadBodyTimeout(200*time.Millisecond))
		c, br := rawConn(t, s)
		const size = 1 << 20 // more than the pipe holds: the loop pauses
		io.WriteString(c, fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size))
		sent := make(chan error, 1)
		go func() {
			_, err := c.Write(make([]byte, size))
			sent <- err
		}()
		// Wait well past the timeout while the pipe is full.
		require.Never(t, func() bool { return s.Stats().Timeouts > 0 }, time.Second, 20*time.Millisecond)
		close(release)
		require.NoError(t, <-sent)
		resp, body := readResponse(t, br, "POST")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, fmt.Sprintf("%d <nil>", size), body)
	})
}

// Stalled uploads are closed after the timeout, and while they wait they
// hold only what they sent, never the Content-Length they announced.
func TestServerStalledUploadsBounded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		const n = 50
		s := startServer(t, b, HandlerFunc(testHandler), WithReadBodyTimeout(time.Second))
		conns := make([]net.Conn, n)
		for i := range conns {
			c, _ := rawConn(t, s)
			conns[i] = c
			_, err := io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4000000\r\n\r\n"+strings.Repeat("x", 1000))
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool { return s.Stats().BufferedBodyBytes >= n*1000 }, 5*time.Second, 5*time.Millisecond)
		held := s.Stats().BufferedBodyBytes
		require.LessOrEqual(t, held, int64(n*bodyMinAlloc), "body buffers reserved up front")
		require.Eventually(t, func() bool {
			st := s.Stats()
			return st.Conns == 0 && st.Timeouts == n && st.BufferedBodyBytes == 0
		}, 10*time.Second, 10*time.Millisecond, "stats %+v", s.Stats())
	})
}

// The budget for buffered bodies bounds what all stalled uploads together
// hold: the requests beyond it are refused with 503.
func TestServerBufferedBodyBudget(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		const budget = 1 << 20
		s := startServer(t, b, HandlerFunc(testHandler), WithMaxBufferedBodyBytes(budget))
		var refused atomic.Int64
		done := make(chan struct{}, 8)
		for range 8 {
			c, br := rawConn(t, s)
			go func() {
				defer func() { done <- struct{}{} }()
				io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n"+strings.Repeat("x", 300<<10))
				c.SetReadDeadline(time.Now().Add(3 * time.Second))
				resp, err := nethttp.ReadResponse(br, nil)
				if err == nil && resp.StatusCode == StatusServiceUnavailable {
					refused.Add(1)
				} else if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("stalled upload: %v", err)
				}
			}()
		}
		require.Eventually(t, func() bool { return s.Stats().OverBudget >= 1 }, 5*time.Second, 5*time.Millisecond)
		for range 8 {
			<-done
		}
		st := s.Stats()
		require.LessOrEqual(t, st.BufferedBodyBytes, int64(budget))
		require.Equal(t, int64(st.OverBudget), refused.Load())
		require.Positive(t, refused.Load())
		require.Less(t, refused.Load(), int64(8))

		// Other clients are still served.
		c, br := rawConn(t, s)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, _ := readResponse(t, br, "GET")
		require.Equal(t, 200, resp.StatusCode)
	})
}

// With Expect: 100-continue the client waits for the server: the body
// timeout starts only when the FromStd handler asks for the body.
func TestFromStdBodyTimeoutWaitsForContinue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		read := make(chan struct{})
		h := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			<-read // the handler takes its time before reading
			body, err := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %v", body, err)
		})
		s := startServer(t, b, FromStd(h), WithReadBodyTimeout(200*time.Millisecond))
		c, br := rawConn(t, s)
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
		require.Never(t, func() bool { return s.Stats().Timeouts > 0 }, time.Second, 20*time.Millisecond)
		close(read)
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "HTTP/1.1 100 Continue\r\n", line)
		br.ReadString('\n')
		io.WriteString(c, "hello")
		resp, body := readResponse(t, br, "POST")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "hello <nil>", body)
	})
}
