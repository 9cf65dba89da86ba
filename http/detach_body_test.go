package http

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/http/internal/h2"

	vnet "github.com/veloq/veloq/net"
)

// hashReader is a StreamBody handler's reader: it hashes the body,
// pausing for a millisecond after every 256 KiB (a slow consumer), and
// answers "length hash", or 400 with the error that ended the body.
type hashReader struct {
	r      *Responder
	h      hash.Hash
	n      int64
	failed *atomic.Pointer[error]
}

func streamHashHandler(failed *atomic.Pointer[error], maxPart *atomic.Int64) Handler {
	return HandlerFunc(func(w *ResponseWriter, req *Request) {
		r, err := w.Detach()
		if err != nil {
			panic(err)
		}
		hr := &hashReader{r: r, h: sha256.New(), failed: failed}
		r.OnBody(func(part []byte, end bool, err error) {
			hr.h.Write(part)
			before := hr.n
			hr.n += int64(len(part))
			if int64(len(part)) > maxPart.Load() {
				maxPart.Store(int64(len(part)))
			}
			if err != nil {
				failed.Store(&err)
				r.Fail(ErrorStatus(err))
				return
			}
			if end {
				r.Respond(StatusOK, fmt.Appendf(nil, "%d %x", hr.n, hr.h.Sum(nil)))
				return
			}
			if before/(256<<10) != hr.n/(256<<10) {
				r.PauseBody()
				r.Loop().AfterFunc(time.Millisecond, r.ResumeBody)
			}
		})
	})
}

func randomBody(t testing.TB, n int) ([]byte, string) {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b, fmt.Sprintf("%d %x", n, sha256.Sum256(b))
}

// TestStreamBodyHTTP1 streams bodies to a slow reader over HTTP/1, with
// Content-Length and chunked: they arrive whole and in order, the parts
// stay small whatever the body (the server stops reading the socket
// instead of collecting), and a body larger than Limits.MaxBodyBytes (4
// MiB) is not refused, as a collected one would be.
func TestStreamBodyHTTP1(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var failed atomic.Pointer[error]
		var maxPart atomic.Int64
		s := startServer(t, b, StreamBody(streamHashHandler(&failed, &maxPart), 0))
		body, want := randomBody(t, 12<<20)
		cl := newClient()
		url := "http://" + s.Addr().String() + "/up"

		resp, err := cl.Post(url, "application/octet-stream", bytes.NewReader(body))
		require.NoError(t, err)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, string(got))
		require.Equal(t, want, string(got))

		// Chunked: the length is unknown to the client.
		resp, err = cl.Post(url, "application/octet-stream", io.MultiReader(bytes.NewReader(body[:1<<20]), bytes.NewReader(body[1<<20:])))
		require.NoError(t, err)
		got, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, want, string(got))

		// A bodyless request ends at once.
		resp, err = cl.Get(url)
		require.NoError(t, err)
		got, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, fmt.Sprintf("0 %x", sha256.Sum256(nil)), string(got))
		require.Nil(t, failed.Load())
		require.LessOrEqual(t, maxPart.Load(), int64(1<<20), "a part larger than a few reads: the body was collected")
	})
}

// TestStreamBodyHTTP2 streams a body over h2c to the slow reader: the
// window goes back only as it reads, and the body arrives whole.
func TestStreamBodyHTTP2(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var failed atomic.Pointer[error]
		var maxPart atomic.Int64
		s := startServer(t, b, StreamBody(streamHashHandler(&failed, &maxPart), 0))
		body, want := randomBody(t, 12<<20)
		cl := h2Client(nil)
		resp, err := cl.Post("http://"+s.Addr().String()+"/up", "application/octet-stream", bytes.NewReader(body))
		require.NoError(t, err)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 2, resp.ProtoMajor)
		require.Equal(t, want, string(got))
		require.Nil(t, failed.Load())
		require.LessOrEqual(t, maxPart.Load(), int64(64<<10), "a part larger than the stream window")
	})
}

// TestStreamBodyErrors: a chunked body malformed mid-way, one cut by the
// client and one past the limit reach the reader as errors, never as a
// complete-looking body.
func TestStreamBodyErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var failed atomic.Pointer[error]
		var maxPart atomic.Int64
		s := startServer(t, b, StreamBody(streamHashHandler(&failed, &maxPart), 1<<20))

		c, br := rawConn(t, s)
		fmt.Fprintf(c, "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nZZ\r\n")
		resp, _ := readResponse(t, br, "POST")
		require.Equal(t, StatusBadRequest, resp.StatusCode)
		require.Eventually(t, func() bool { return failed.Load() != nil }, 5*time.Second, time.Millisecond)
		require.ErrorIs(t, *failed.Load(), ErrBadRequest)
		expectClosed(t, c, br)

		failed.Store(nil)
		c, _ = rawConn(t, s)
		fmt.Fprintf(c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\npartial")
		require.Eventually(t, func() bool { return maxPart.Load() > 0 }, 5*time.Second, time.Millisecond)
		c.Close()
		require.Eventually(t, func() bool { return failed.Load() != nil }, 5*time.Second, time.Millisecond)
		require.ErrorIs(t, *failed.Load(), ErrBodyAborted)

		failed.Store(nil)
		big, br := rawConn(t, s)
		fmt.Fprintf(big, "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
		chunk := strings.Repeat("x", 64<<10)
		go func() {
			for range 20 {
				if _, err := fmt.Fprintf(big, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
					return
				}
			}
		}()
		resp, _ = readResponse(t, br, "POST")
		require.Equal(t, StatusRequestEntityTooLarge, resp.StatusCode)
		require.ErrorIs(t, *failed.Load(), ErrBodyTooLarge)

		// Content-Length past the limit: 413 before the handler runs.
		c, br = rawConn(t, s)
		fmt.Fprintf(c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 2<<20)
		resp, _ = readResponse(t, br, "POST")
		require.Equal(t, StatusRequestEntityTooLarge, resp.StatusCode)
	})
}

// TestStreamBodyContinue: the 100 Continue goes out only when the
// handler asks for the body, as net/http sends it on the first Read.
func TestStreamBodyContinue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var asked atomic.Bool
		s := startServer(t, b, StreamBody(HandlerFunc(func(w *ResponseWriter, req *Request) {
			r, _ := w.Detach()
			r.Loop().AfterFunc(30*time.Millisecond, func() {
				asked.Store(true)
				var n int
				r.OnBody(func(part []byte, end bool, err error) {
					n += len(part)
					if end {
						r.Respond(StatusOK, fmt.Appendf(nil, "%d %v", n, err))
					}
				})
			})
		}), 0))
		c, br := rawConn(t, s)
		fmt.Fprintf(c, "POST /up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		require.True(t, asked.Load(), "100 Continue before the handler asked for the body")
		require.Equal(t, "HTTP/1.1 100 Continue\r\n", line)
		_, err = br.ReadString('\n')
		require.NoError(t, err)
		fmt.Fprintf(c, "hello")
		resp, body := readResponse(t, br, "POST")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "5 <nil>", body)
		// The body was read to its end: the connection goes on.
		fmt.Fprintf(c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
		resp, body = readResponse(t, bufio.NewReader(br), "POST")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "2 <nil>", body)
	})
}

// countingReader is a body of n bytes that counts what was read of it.
type countingReader struct {
	n, read atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	left := c.n.Load() - c.read.Load()
	if left == 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), left)
	clear(p[:k])
	c.read.Add(k)
	return int(k), nil
}

// TestStreamBodyHTTP2Window: while the reader is paused, the server
// withholds the stream's window, so the client can send no more than
// about one window (64 KiB) of an 8 MiB body; once the reader resumes,
// the rest comes.
func TestStreamBodyHTTP2Window(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		paused := make(chan *Responder, 1)
		s := startServer(t, b, StreamBody(HandlerFunc(func(w *ResponseWriter, req *Request) {
			r, _ := w.Detach()
			var n int
			first := true
			r.OnBody(func(part []byte, end bool, err error) {
				n += len(part)
				if first && len(part) > 0 {
					first = false
					r.PauseBody()
					paused <- r
				}
				if end {
					r.Respond(StatusOK, fmt.Appendf(nil, "%d %v", n, err))
				}
			})
		}), 0))
		body := &countingReader{}
		body.n.Store(8 << 20)
		done := make(chan string, 1)
		go func() {
			resp, err := h2Client(nil).Post("http://"+s.Addr().String()+"/up", "application/octet-stream", body)
			if err != nil {
				done <- err.Error()
				return
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			done <- string(got)
		}()
		var r *Responder
		select {
		case r = <-paused:
		case <-time.After(10 * time.Second):
			t.Fatal("no body part")
		}
		require.Never(t, func() bool { return body.read.Load() > 512<<10 }, 300*time.Millisecond, 5*time.Millisecond,
			"the client sent past the withheld window")
		require.NoError(t, r.Loop().Post(r.ResumeBody))
		select {
		case got := <-done:
			require.Equal(t, fmt.Sprintf("%d <nil>", 8<<20), got)
		case <-time.After(20 * time.Second):
			t.Fatal("the body did not complete after ResumeBody")
		}
	})
}

// TestStreamBodyAnsweredEarlyHTTP2: an answer that ends before its
// reader took the body (OnBody never called) gives back the stream
// window that the unread bytes held, so that a client whose window they
// filled can go on and end its stream, as it must (RFC 9113 §8.1).
func TestStreamBodyAnsweredEarlyHTTP2(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, StreamBody(HandlerFunc(func(w *ResponseWriter, req *Request) {
			r, _ := w.Detach()
			r.Loop().AfterFunc(20*time.Millisecond, func() { r.Respond(StatusForbidden, []byte("no")) })
		}), 0))
		c := dialH2(t, s.Addr().String())
		require.NoError(t, c.write(h2.AppendHeaders(nil, 1, false, c.block("POST", "/up"), h2.MinMaxFrameSize)))
		part := make([]byte, 16384)
		for sent := 0; sent < 65535; sent += len(part) {
			require.NoError(t, c.write(h2.AppendData(nil, 1, false, part[:min(len(part), 65535-sent)])))
		}
		require.Equal(t, StatusForbidden, c.status(1))
		for {
			h, p, ok := c.next() // fails the test on a stall
			require.True(t, ok, "connection closed")
			if h.Stream != 1 {
				continue
			}
			if h.Type == h2.TypeWindowUpdate {
				inc, err := h2.ParseWindowUpdate(h, p)
				require.NoError(t, err)
				require.Greater(t, inc, uint32(0))
				return
			}
			require.NotEqual(t, h2.TypeRSTStream, h.Type, "reset with the window still held")
		}
	})
}
