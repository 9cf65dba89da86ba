package http

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	nethttp "net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/veloq/veloq/reactor"
	"github.com/veloq/veloq/uring"
)

// backends is the table every server test runs over (the pattern of
// net/helpers_test.go). io_uring skips where the kernel refuses it.
var backends = []reactor.Backend{reactor.BackendUring, reactor.BackendEpoll}

func forEachBackend(t *testing.T, f func(t *testing.T, b reactor.Backend)) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			if b == reactor.BackendUring {
				if err := reactor.ProbeUring(); err != nil {
					if errors.Is(err, uring.ErrUnavailable) || strings.Contains(err.Error(), "io_uring") {
						t.Skipf("io_uring unavailable here: %v", err)
					}
					t.Fatalf("probe: %v", err)
				}
			}
			f(t, b)
		})
	}
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// startServer serves h on 127.0.0.1:0 with two loops and shuts it down at
// the end of the test.
func startServer(t testing.TB, b reactor.Backend, h Handler, opts ...Option) *Server {
	t.Helper()
	opts = append([]Option{WithBackend(b), WithLoops(2), WithLogger(testLogger(t))}, opts...)
	s := NewServer(h, opts...)
	if err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// testHandler is the echo-server's: GET / greets, POST /echo echoes.
func testHandler(w *ResponseWriter, r *Request) {
	switch string(r.Path) {
	case "/":
		w.Header().Set("Content-Type", "text/plain")
		w.WriteString("Hello, World!")
	case "/echo":
		w.Header().Set("X-Method", string(r.Method))
		w.Header().Set("X-Body-Len", strconv.Itoa(len(r.Body)))
		w.Write(r.Body)
	case "/panic":
		panic("boom")
	default:
		w.WriteHeader(StatusNotFound)
	}
}

func newClient() *nethttp.Client {
	return &nethttp.Client{
		Timeout:   10 * time.Second,
		Transport: &nethttp.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true},
	}
}

// rawConn dials the server for hand-written requests.
func rawConn(t testing.TB, s *Server) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

// readResponse reads one response and its whole body.
func readResponse(t testing.TB, br *bufio.Reader, method string) (*nethttp.Response, string) {
	t.Helper()
	resp, err := nethttp.ReadResponse(br, &nethttp.Request{Method: method})
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	resp.Body.Close()
	return resp, string(body)
}

// expectClosed waits for the server to close the connection.
func expectClosed(t testing.TB, c net.Conn, br *bufio.Reader) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	rest, err := io.ReadAll(br)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("connection not closed: %v (read %q)", err, rest)
	}
	if len(rest) > 0 {
		t.Fatalf("unexpected bytes before close: %q", rest)
	}
}

func TestServerRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b reactor.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler))
		base := "http://" + s.Addr().String()
		cl := newClient()
		defer cl.CloseIdleConnections()

		resp, err := cl.Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "Hello, World!" || resp.Header.Get("Content-Type") != "text/plain" {
			t.Fatalf("GET /: %d %q %v", resp.StatusCode, body, resp.Header)
		}
		if resp.Header.Get("Date") == "" || resp.ContentLength != 13 {
			t.Fatalf("GET / headers: %v", resp.Header)
		}

		for _, size := range []int{0, 1, 100, 70 << 10, 1 << 20, 4<<20 - 1} {
			payload := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
			resp, err := cl.Post(base+"/echo", "application/octet-stream", bytes.NewReader(payload))
			if err != nil {
				t.Fatalf("POST %d: %v", size, err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, payload) || resp.Header.Get("X-Body-Len") != strconv.Itoa(size) {
				t.Fatalf("POST %d: status %d, %d bytes back, err %v", size, resp.StatusCode, len(got), err)
			}
		}

		resp, err = cl.Get(base + "/nope")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Fatalf("GET /nope: %d", resp.StatusCode)
		}
		if st := s.Stats(); st.Accepted != 1 {
			t.Errorf("keep-alive: %d connections accepted, want 1", st.Accepted)
		}
	})
}

func TestServerChunkedRequest(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b reactor.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler))
		cl := newClient()
		defer cl.CloseIdleConnections()
		for _, size := range []int{5, 100 << 10, 2 << 20} {
			payload := bytes.Repeat([]byte("x"), size)
			// An io.Reader of unknown length makes the client send chunked.
			req, _ := nethttp.NewRequest("POST", "http://"+s.Addr().String()+"/echo", io.MultiReader(bytes.NewReader(payload)))
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !bytes.Equal(got, payload) {
				t.Fatalf("chunked POST %d: got %d bytes", size, len(got))
			}
		}
		// Over the limit: 413.
		c, br := rawConn(t, s)
		fmt.Fprintf(c, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n", 5<<20)
		resp, _ := readResponse(t, br, "POST")
		if resp.StatusCode != 413 {
			t.Fatalf("big chunk: %d", resp.StatusCode)
		}
	})
}

func TestServerPipelining(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b reactor.Backend) {
		s := startServer(t, b, HandlerFunc(func(w *ResponseWriter, r *Request) {
			w.Write(r.Path)
		}))
		c, br := rawConn(t, s)
		var req strings.Builder
		for i := range 10 {
			fmt.Fprintf(&req, "GET /r%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
		}
		if _, err := io.WriteString(c, req.String()); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			resp, body := readResponse(t, br, "GET")
			if resp.StatusCode != 200 || body != fmt.Sprintf("/r%d", i) {
				t.Fatalf("response %d: %d %q", i, resp.StatusCode, body)
			}
		}
	})
}
