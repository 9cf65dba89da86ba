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

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// forEachBackend: every behaviour test runs over both backends from one
// shared table.
func forEachBackend(t *testing.T, f func(t *testing.T, b vnet.Backend)) {
	t.Helper()
	backendtest.Run(t, f)
}

// testLogger is the shared test logger (backendtest.Logger).
func testLogger(t testing.TB) *slog.Logger { return backendtest.Logger(t) }

// newServer is NewServer for a test: it fails the test on an error.
func newServer(tb testing.TB, h Handler, opts ...Option) *Server {
	tb.Helper()
	s, err := NewServer(h, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// startServer serves h on 127.0.0.1:0 with two loops and shuts it down at
// the end of the test.
func startServer(t testing.TB, b vnet.Backend, h Handler, opts ...Option) *Server {
	t.Helper()
	opts = append([]Option{WithNetOptions(vnet.WithBackend(b)), WithNetOptions(vnet.WithLoops(2)), WithLogger(testLogger(t))}, opts...)
	s := newServer(t, h, opts...)
	if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
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

// TestServerDate checks the Date header against the wall clock, and that
// it moves on with it: the server caches the text for a second of its
// loop's clock.
func TestServerDate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler))
		cl := newClient()
		defer cl.CloseIdleConnections()
		date := func() time.Time {
			resp, err := cl.Get("http://" + s.Addr().String() + "/")
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			d, err := nethttp.ParseTime(resp.Header.Get("Date"))
			require.NoError(t, err)
			require.WithinDuration(t, time.Now(), d, 2*time.Second)
			return d
		}
		first := date()
		require.Eventually(t, func() bool { return date().After(first) }, 5*time.Second, 50*time.Millisecond)
	})
}

func TestServerRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
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
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
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
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
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

// TestServerPipelinedSameField: pipelined answers of one handler come
// from the head cache; each carries the field its handler left, also when
// the handler changed the value's bytes through Get on some requests.
func TestServerPipelinedSameField(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(func(w *ResponseWriter, r *Request) {
			w.Header().Set("Content-Type", "text/plain")
			if string(r.Path) == "/upper" {
				copy(w.Header().Get("Content-Type"), "TEXT")
			}
			w.WriteString("Hello, World!")
		}))
		c, br := rawConn(t, s)
		paths := []string{"/", "/", "/upper", "/", "/upper", "/upper", "/"}
		var req strings.Builder
		for _, p := range paths {
			fmt.Fprintf(&req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", p)
		}
		_, err := io.WriteString(c, req.String())
		require.NoError(t, err)
		for i, p := range paths {
			resp, body := readResponse(t, br, "GET")
			want := "text/plain"
			if p == "/upper" {
				want = "TEXT/plain"
			}
			require.Equal(t, want, resp.Header.Get("Content-Type"), "response %d", i)
			require.Equal(t, "Hello, World!", body, "response %d", i)
		}
	})
}

func TestServerConnectionSemantics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler))
		tests := []struct {
			name, req  string
			method     string
			wantConn   string
			wantBody   string
			wantClosed bool
		}{
			{"1.1 keep-alive", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "GET", "", "Hello, World!", false},
			{"1.1 close", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "GET", "close", "Hello, World!", true},
			{"1.0", "GET / HTTP/1.0\r\n\r\n", "GET", "close", "Hello, World!", true},
			{"1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "GET", "keep-alive", "Hello, World!", false},
			{"HEAD", "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n", "HEAD", "", "", false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				c, br := rawConn(t, s)
				io.WriteString(c, tt.req)
				resp, body := readResponse(t, br, tt.method)
				if resp.StatusCode != 200 || body != tt.wantBody || resp.Header.Get("Connection") != tt.wantConn && !(tt.wantConn == "close" && resp.Close) {
					t.Fatalf("%d %q Connection=%q close=%t", resp.StatusCode, body, resp.Header.Get("Connection"), resp.Close)
				}
				if tt.method == "HEAD" && resp.ContentLength != 13 {
					t.Fatalf("HEAD Content-Length %d, want 13", resp.ContentLength)
				}
				if tt.wantClosed {
					expectClosed(t, c, br)
					return
				}
				// Still open: a second request is answered.
				io.WriteString(c, tt.req)
				if resp, _ := readResponse(t, br, tt.method); resp.StatusCode != 200 {
					t.Fatalf("second request: %d", resp.StatusCode)
				}
			})
		}
	})
}

func TestServerExpectContinue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler))
		c, br := rawConn(t, s)
		io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
		if line, _ := br.ReadString('\n'); line != "HTTP/1.1 100 Continue\r\n" {
			t.Fatalf("interim response: %q", line)
		}
		br.ReadString('\n')
		io.WriteString(c, "hello")
		if resp, body := readResponse(t, br, "POST"); resp.StatusCode != 200 || body != "hello" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		// Through Go's client too.
		cl := newClient()
		cl.Transport.(*nethttp.Transport).ExpectContinueTimeout = 5 * time.Second
		req, _ := nethttp.NewRequest("POST", "http://"+s.Addr().String()+"/echo", strings.NewReader("payload"))
		req.Header.Set("Expect", "100-continue")
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != "payload" {
			t.Fatalf("client with Expect: %q", got)
		}
	})
}

func TestServerProtocolErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithRequestLimits(Limits{MaxBodyBytes: 1 << 10}))
		tests := []struct {
			name, req string
			status    int
		}{
			{"bad method", "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
			{"bare LF", "GET / HTTP/1.1\nHost: x\r\n\r\n", 400},
			{"no host", "GET / HTTP/1.1\r\n\r\n", 400},
			{"second host", "GET / HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nhost: y\r\n\r\n", 400},
			{"short target, bad version", "GET /a HTTP/1.x\r\nHost: x\r\n\r\n", 400},
			{"bad content-length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", 400},
			{"CL and TE", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
			{"bad chunk", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
			{"body too large", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n", 413},
			{"chunked too large", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n", 413},
			{"URI too long", "GET /" + strings.Repeat("a", DefaultMaxTargetBytes) + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
			{"header too large", "GET / HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("a", DefaultMaxHeaderBytes) + "\r\n\r\n", 431},
			{"unknown coding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
			{"HTTP/2.0", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				c, br := rawConn(t, s)
				io.WriteString(c, tt.req)
				resp, _ := readResponse(t, br, "GET")
				if resp.StatusCode != tt.status || !resp.Close {
					t.Fatalf("status %d close=%t, want %d and close", resp.StatusCode, resp.Close, tt.status)
				}
				expectClosed(t, c, br)
			})
		}
		if st := s.Stats(); st.ProtoErrors != uint64(len(tests)) {
			t.Errorf("ProtoErrors = %d, want %d", st.ProtoErrors, len(tests))
		}
	})
}

// TestServerTimeouts checks the read-header and idle timeouts by their
// bounds that hold however loaded the machine is: a deadline never fires
// early (the loop clock it is kept on is read after the bytes that start
// it were sent, give or take clockSlack), and the client can make a
// condition last as long as it likes (a head trickling in, requests
// coming back to back). It does not assert how soon a deadline fires
// after it is due, which a loaded machine stretches: the server's
// Timeouts count says the close was the timeout's.
func TestServerTimeouts(t *testing.T) {
	const (
		headTimeout = 150 * time.Millisecond
		idleTimeout = 300 * time.Millisecond
		// clockSlack: the loop clock is cached for an iteration, so a
		// deadline can start a little before the send that caused it.
		clockSlack = 20 * time.Millisecond
	)
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler),
			WithReadHeaderTimeout(headTimeout), WithNextRequestTimeout(idleTimeout))

		// Slowloris: a head trickling in is cut after the read-header
		// timeout, counted from the accept, although each line arrives
		// well within it and the trickle would go on for seconds.
		start := time.Now()
		c, br := rawConn(t, s)
		trickled := trickleHead(t, c, 30*time.Millisecond, 90)
		expectClosed(t, c, br)
		require.GreaterOrEqual(t, time.Since(start), headTimeout-clockSlack, "head cut before the read-header timeout")
		require.Eventually(t, func() bool { return s.Stats().Timeouts == 1 }, 5*time.Second, time.Millisecond)
		require.False(t, <-trickled, "the head trickled to its end before the connection was cut")

		// Idle: a keep-alive connection is served for as long as requests
		// keep coming, beyond one idle timeout after the first (the timer
		// runs from the last request), and closed once an idle timeout has
		// passed since the last, not before.
		// Until the first answer the read-header timeout runs, from the
		// accept; then the idle timeout, from each request.
		sent, window := time.Now(), headTimeout
		c2, br2 := rawConn(t, s)
		for first := time.Now(); time.Since(first) < 2*idleTimeout; {
			at := time.Now()
			if err := getRoot(c2, br2); err != nil {
				// Closed between requests: legitimate only if this client
				// stalled for the whole window after its last request.
				require.GreaterOrEqual(t, time.Since(sent), window-clockSlack,
					"keep-alive connection closed within its timeout: %v", err)
				break
			}
			sent, window = at, idleTimeout
		}
		expectClosed(t, c2, br2)
		require.GreaterOrEqual(t, time.Since(sent), window-clockSlack, "idle connection closed before the idle timeout")
		require.Eventually(t, func() bool { return s.Stats().Timeouts == 2 }, 5*time.Second, time.Millisecond)
	})
}

// trickleHead writes an unfinished request head to c, the request line and
// then one header line every gap, at most lines of them, and stops once a
// write fails or the test ends. The channel says whether it wrote them all.
func trickleHead(t *testing.T, c net.Conn, gap time.Duration, lines int) <-chan bool {
	done := make(chan bool, 1)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\n"); err != nil {
			done <- false
			return
		}
		tick := time.NewTicker(gap) // the slow client's pace, not a synchronisation
		defer tick.Stop()
		for range lines {
			select {
			case <-stop:
				done <- false
				return
			case <-tick.C:
			}
			if _, err := io.WriteString(c, "X-A: b\r\n"); err != nil {
				done <- false
				return
			}
		}
		done <- true
	}()
	return done
}

// getRoot sends GET / on c and reads its answer, which must be a 200.
func getRoot(c net.Conn, br *bufio.Reader) error {
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return err
	}
	resp, err := nethttp.ReadResponse(br, &nethttp.Request{Method: "GET"})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func TestServerMaxConns(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithMaxConns(2, true))
		var keep []net.Conn
		for range 2 {
			c, br := rawConn(t, s)
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			readResponse(t, br, "GET")
			keep = append(keep, c)
		}
		c, br := rawConn(t, s)
		resp, _ := readResponse(t, br, "GET")
		if resp.StatusCode != 503 {
			t.Fatalf("third connection: %d, want 503", resp.StatusCode)
		}
		expectClosed(t, c, br)
		keep[0].Close()
		require.Eventually(t, func() bool { return s.Stats().Conns <= 1 }, 3*time.Second, time.Millisecond)
		c, br = rawConn(t, s)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
			t.Fatalf("after a slot freed: %d", resp.StatusCode)
		}
		if st := s.Stats(); st.Rejected != 1 {
			t.Errorf("Rejected = %d, want 1", st.Rejected)
		}
	})
}

func TestServerPanic(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithNetOptions(vnet.WithLoops(1)))
		other, obr := rawConn(t, s)
		io.WriteString(other, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		readResponse(t, obr, "GET")

		c, br := rawConn(t, s)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /panic HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
			t.Fatalf("request before the panic: %d", resp.StatusCode)
		}
		if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 500 {
			t.Fatalf("panic: %d, want 500", resp.StatusCode)
		}
		expectClosed(t, c, br)
		io.WriteString(other, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, _ := readResponse(t, obr, "GET"); resp.StatusCode != 200 {
			t.Fatalf("other connection on the same loop: %d", resp.StatusCode)
		}
		if st := s.Stats(); st.Panics != 1 {
			t.Errorf("Panics = %d, want 1", st.Panics)
		}
	})
}

// TestServerPanicInBatch: a handler's panic in the middle of pipelined
// requests, which serveLoop runs under one recover for the whole batch,
// is answered as before: the requests before it are answered, an
// ErrAbortHandler closes the connection without an answer, any other
// panic gets a 500, a request whose body came later (answered outside the
// batch) too, and the next connection's batch is served as usual.
func TestServerPanicInBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(func(w *ResponseWriter, r *Request) {
			if string(r.Path) == "/abort" {
				panic(nethttp.ErrAbortHandler)
			}
			testHandler(w, r)
		}), WithNetOptions(vnet.WithLoops(1)))
		get := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"

		c, br := rawConn(t, s)
		io.WriteString(c, get+get+"GET /abort HTTP/1.1\r\nHost: x\r\n\r\n"+get)
		for i := 0; i < 2; i++ {
			if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 || body != "Hello, World!" {
				t.Fatalf("request %d before the abort: %d %q", i, resp.StatusCode, body)
			}
		}
		expectClosed(t, c, br)

		c, br = rawConn(t, s)
		io.WriteString(c, get+"POST /panic HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n")
		if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
			t.Fatalf("request before the panic: %d", resp.StatusCode)
		}
		io.WriteString(c, "body"+get)
		if resp, _ := readResponse(t, br, "POST"); resp.StatusCode != 500 {
			t.Fatalf("panic with a late body: %d, want 500", resp.StatusCode)
		}
		expectClosed(t, c, br)

		c, br = rawConn(t, s)
		io.WriteString(c, get+get+get)
		for i := 0; i < 3; i++ {
			if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 || body != "Hello, World!" {
				t.Fatalf("request %d after the panics: %d %q", i, resp.StatusCode, body)
			}
		}
		if st := s.Stats(); st.Panics != 1 {
			t.Errorf("Panics = %d, want 1 (ErrAbortHandler is none)", st.Panics)
		}
	})
}

// TestServerBatchOrder: the answers of pipelined requests, which
// serveLoop queues together at the end of their batch, leave in the
// requests' order however the others between them are written: an answer
// too big for the batch, a detached one answered in its handler, bytes a
// handler writes to the connection itself, and a last one that closes.
func TestServerBatchOrder(t *testing.T) {
	big := strings.Repeat("b", maxPending+1)
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(func(w *ResponseWriter, r *Request) {
			switch string(r.Path) {
			case "/big":
				w.WriteString(big)
			case "/detach":
				d, err := w.Detach()
				require.NoError(t, err)
				d.Respond(StatusOK, []byte("detached"))
			case "/conn":
				w.Conn().WriteString("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nraw")
				w.WriteString("after raw")
			case "/close":
				w.Header().Set("Connection", "close")
				w.WriteString("last")
			default:
				w.Write(r.Path)
			}
		}), WithNetOptions(vnet.WithLoops(1)))
		c, br := rawConn(t, s)
		var reqs strings.Builder
		for _, p := range []string{"/1", "/big", "/2", "/detach", "/3", "/conn", "/4", "/close"} {
			reqs.WriteString("GET " + p + " HTTP/1.1\r\nHost: x\r\n\r\n")
		}
		io.WriteString(c, reqs.String())
		for _, want := range []string{"/1", big, "/2", "detached", "/3", "raw", "after raw", "/4", "last"} {
			if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 || body != want {
				t.Fatalf("got %d %.40q, want %.40q", resp.StatusCode, body, want)
			}
		}
		expectClosed(t, c, br)
	})
}

func TestServerOffloadedInOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		pool := testPool(t)
		slow := Offloaded(pool, HandlerFunc(func(w *ResponseWriter, r *Request) {
			time.Sleep(20 * time.Millisecond)
			w.WriteString("slow ")
			w.Write(r.Body)
		}))
		s := startServer(t, b, HandlerFunc(func(w *ResponseWriter, r *Request) {
			if string(r.Path) == "/slow" {
				slow.ServeHTTP(w, r)
				return
			}
			w.Write(r.Path)
		}))
		c, br := rawConn(t, s)
		io.WriteString(c, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"+
			"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody"+
			"GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
		for _, want := range []string{"/a", "slow body", "/b"} {
			if _, body := readResponse(t, br, "GET"); body != want {
				t.Fatalf("got %q, want %q", body, want)
			}
		}
		if st := s.Stats(); st.Offloaded != 1 {
			t.Errorf("Offloaded = %d, want 1", st.Offloaded)
		}
	})
}

func TestServerShutdownFinishesInFlight(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		started := make(chan struct{})
		h := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			if r.URL.Path != "/" {
				io.WriteString(w, r.URL.Path)
				return
			}
			close(started)
			time.Sleep(200 * time.Millisecond)
			io.WriteString(w, "finished")
		})
		s := newServer(t, FromStd(h), WithNetOptions(vnet.WithBackend(b)), WithNetOptions(vnet.WithLoops(2)), WithLogger(testLogger(t)))
		if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		// A keep-alive connection waiting for its next request is closed
		// at once.
		idle, ibr := rawConn(t, s)
		io.WriteString(idle, "GET /idle HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, body := readResponse(t, ibr, "GET"); body != "/idle" {
			t.Fatalf("idle connection's request: %q", body)
		}
		c, br := rawConn(t, s)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		<-started
		// A new one that has not sent its request yet is not idle: its
		// request, sent after Shutdown started, gets an answer with
		// Connection: close (a hot upgrade relies on it).
		fresh, fbr := rawConn(t, s)
		require.Eventually(t, func() bool { return s.Stats().Accepted == 3 }, 5*time.Second, time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- s.Shutdown(ctx) }()
		expectClosed(t, idle, ibr)
		io.WriteString(fresh, "GET /fresh HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, body := readResponse(t, fbr, "GET"); resp.StatusCode != 200 || body != "/fresh" || !resp.Close {
			t.Fatalf("new connection: %d %q close=%t", resp.StatusCode, body, resp.Close)
		}
		resp, body := readResponse(t, br, "GET")
		if resp.StatusCode != 200 || body != "finished" || !resp.Close {
			t.Fatalf("in-flight request: %d %q close=%t", resp.StatusCode, body, resp.Close)
		}
		if err := <-done; err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if _, err := net.DialTimeout("tcp", s.Addr().String(), time.Second); err == nil {
			t.Fatal("still accepting after Shutdown")
		}
	})
}
