package http

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	nethttp "net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/executor"
	vnet "github.com/veloq/veloq/net"
)

func testPool(t testing.TB) *executor.Pool {
	p := executor.NewPool(executor.WithWorkers(2), executor.WithLogger(testLogger(t)))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Shutdown(ctx)
	})
	return p
}

// stdMux is a real net/http router with method and path patterns.
func stdMux(t testing.TB) *nethttp.ServeMux {
	mux := nethttp.NewServeMux()
	mux.HandleFunc("GET /users/{id}", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "user %s via %s %s host=%s remote=%t", r.PathValue("id"), r.Method, r.Proto, r.Host, r.RemoteAddr != "")
	})
	mux.HandleFunc("POST /echo", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("X-Content-Length", fmt.Sprint(r.ContentLength))
		w.Header().Set("X-Transfer-Encoding", strings.Join(r.TransferEncoding, ","))
		if _, err := io.Copy(w, r.Body); err != nil {
			t.Errorf("echo copy: %v", err)
		}
	})
	mux.HandleFunc("GET /stream", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		for i := range 3 {
			fmt.Fprintf(w, "part%d;", i)
			w.(nethttp.Flusher).Flush()
			time.Sleep(10 * time.Millisecond)
		}
	})
	mux.HandleFunc("GET /panic", func(w nethttp.ResponseWriter, r *nethttp.Request) { panic("boom") })
	return mux
}

// stdModes are the places a FromStd handler can run.
func stdModes(t *testing.T) []struct {
	name string
	opt  StdOption
} {
	return []struct {
		name string
		opt  StdOption
	}{
		{"goroutine", nil},
		{"blocking-pool", WithStdBlockingPool(testBlockingPool(t, 8))},
		{"stealable-pool", WithStdPool(testPool(t))},
	}
}

func testBlockingPool(t testing.TB, goroutines int) *executor.BlockingPool {
	p := executor.NewBlockingPool(executor.WithMaxGoroutines(goroutines), executor.WithBlockingLogger(testLogger(t)))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Shutdown(ctx)
	})
	return p
}

func TestFromStdRouter(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for _, m := range stdModes(t) {
			t.Run(m.name, func(t *testing.T) { testFromStdRouter(t, b, m.opt) })
		}
	})
}

func testFromStdRouter(t *testing.T, b vnet.Backend, opt StdOption) {
	{
		s := startServer(t, b, FromStd(stdMux(t), opt))
		base := "http://" + s.Addr().String()
		cl := newClient()
		defer cl.CloseIdleConnections()

		for i := range 3 {
			resp, err := cl.Get(fmt.Sprintf("%s/users/%d", base, i))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := fmt.Sprintf("user %d via GET HTTP/1.1 host=%s remote=true", i, s.Addr())
			if resp.StatusCode != 200 || string(body) != want {
				t.Fatalf("GET /users/%d: %d %q, want %q", i, resp.StatusCode, body, want)
			}
		}
		resp, err := cl.Post(base+"/users/1", "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 {
			t.Fatalf("POST /users/1: %d, want 405", resp.StatusCode)
		}

		// Bodies: Content-Length and chunked, small and large (streamed
		// both ways through the pipe and the writer).
		for _, size := range []int{0, 10, 1 << 20, 4 << 20} {
			for _, chunked := range []bool{false, true} {
				payload := bytes.Repeat([]byte("abcdefgh"), size/8+1)[:size]
				var body io.Reader = bytes.NewReader(payload)
				if chunked {
					body = io.MultiReader(body)
				}
				req, _ := nethttp.NewRequest("POST", base+"/echo", body)
				resp, err := cl.Do(req)
				if err != nil {
					t.Fatalf("POST %d chunked=%t: %v", size, chunked, err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || !bytes.Equal(got, payload) {
					t.Fatalf("POST %d chunked=%t: %d bytes back (%v)", size, chunked, len(got), err)
				}
				wantTE := ""
				if chunked {
					wantTE = "chunked"
				}
				if te := resp.Header.Get("X-Transfer-Encoding"); te != wantTE {
					t.Fatalf("POST %d chunked=%t: request TransferEncoding %q", size, chunked, te)
				}
			}
		}
	}
}

func TestFromStdFlushStreams(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		release := make(chan struct{})
		h := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			io.WriteString(w, "first;")
			w.(nethttp.Flusher).Flush()
			<-release
			io.WriteString(w, "second")
		})
		s := startServer(t, b, FromStd(h, nil))
		c, br := rawConn(t, s)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := nethttp.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
			t.Fatalf("TransferEncoding %v, want chunked", resp.TransferEncoding)
		}
		first := make([]byte, len("first;"))
		if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "first;" {
			t.Fatalf("first chunk before the handler finished: %q %v", first, err)
		}
		close(release)
		rest, err := io.ReadAll(resp.Body)
		if err != nil || string(rest) != "second" {
			t.Fatalf("rest: %q %v", rest, err)
		}
		// The connection is still usable.
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, body := readResponse(t, br, "GET"); body != "first;second" {
			t.Fatalf("second request: %q", body)
		}
	})
}

func TestFromStdPipelinedInOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, FromStd(stdMux(t), nil))
		c, br := rawConn(t, s)
		var req strings.Builder
		for i := range 10 {
			if i%3 == 1 {
				fmt.Fprintf(&req, "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nr%02d", i)
			} else {
				fmt.Fprintf(&req, "GET /users/%d HTTP/1.1\r\nHost: h\r\n\r\n", i)
			}
		}
		io.WriteString(c, req.String())
		for i := range 10 {
			resp, body := readResponse(t, br, "GET")
			want := fmt.Sprintf("user %d via GET HTTP/1.1 host=h remote=true", i)
			if i%3 == 1 {
				want = fmt.Sprintf("r%02d", i)
			}
			if resp.StatusCode != 200 || body != want {
				t.Fatalf("response %d: %d %q, want %q", i, resp.StatusCode, body, want)
			}
		}
	})
}

func TestFromStdContextCanceledOnDisconnect(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		started := make(chan struct{})
		canceled := make(chan struct{})
		h := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			close(started)
			select {
			case <-r.Context().Done():
				close(canceled)
			case <-time.After(5 * time.Second):
			}
		})
		s := startServer(t, b, FromStd(h, nil))
		c, _ := rawConn(t, s)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		<-started
		c.Close()
		select {
		case <-canceled:
		case <-time.After(3 * time.Second):
			t.Fatal("request context not canceled after the client went away")
		}
	})
}

func TestFromStdExpectContinue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, FromStd(stdMux(t), nil))
		c, br := rawConn(t, s)
		io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
		line, err := br.ReadString('\n')
		if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
			t.Fatalf("interim response: %q %v", line, err)
		}
		if l, _ := br.ReadString('\n'); l != "\r\n" {
			t.Fatalf("interim response end: %q", l)
		}
		io.WriteString(c, "hello")
		if resp, body := readResponse(t, br, "POST"); resp.StatusCode != 200 || body != "hello" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	})
}

func TestFromStdPanic(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, FromStd(stdMux(t), nil))
		other, obr := rawConn(t, s)
		io.WriteString(other, "GET /users/7 HTTP/1.1\r\nHost: x\r\n\r\n")
		readResponse(t, obr, "GET")

		c, br := rawConn(t, s)
		io.WriteString(c, "GET /panic HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 500 {
			t.Fatalf("panic: %d, want 500", resp.StatusCode)
		}
		expectClosed(t, c, br)

		io.WriteString(other, "GET /users/8 HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, _ := readResponse(t, obr, "GET"); resp.StatusCode != 200 {
			t.Fatalf("other connection after the panic: %d", resp.StatusCode)
		}
	})
}

func TestFromStdHTTP10(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, FromStd(stdMux(t), nil))
		c, br := rawConn(t, s)
		io.WriteString(c, "GET /stream HTTP/1.0\r\n\r\n")
		resp, err := nethttp.ReadResponse(bufio.NewReader(br), &nethttp.Request{Method: "GET"})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "part0;part1;part2;" || resp.ContentLength != -1 {
			t.Fatalf("HTTP/1.0 streamed body %q, length %d", body, resp.ContentLength)
		}
	})
}

// Over HTTP/1.1 a FromStd handler's trailers follow a chunked body, both
// the announced ones and those set with net/http.TrailerPrefix; a body of
// known length carries none, as HTTP/1 cannot.
func TestFromStdHTTP1Trailers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			if r.URL.Path == "/length" {
				w.Header().Set("Content-Length", "5")
			} else {
				w.Header().Set("Trailer", "X-Sum")
			}
			io.WriteString(w, "he")
			w.(nethttp.Flusher).Flush()
			io.WriteString(w, "llo")
			w.Header().Set("X-Sum", "5")
			w.Header().Set(nethttp.TrailerPrefix+"X-Late", "yes")
		})))
		cl := newClient()
		for _, tc := range []struct {
			path      string
			sum, late string
		}{
			{"/chunked", "5", "yes"},
			{"/length", "", ""},
		} {
			resp, err := cl.Get(baseURL(s, "http") + tc.path)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, "hello", string(body))
			require.Equal(t, tc.sum, resp.Trailer.Get("X-Sum"), tc.path)
			require.Equal(t, tc.late, resp.Trailer.Get("X-Late"), tc.path)
		}
	})
}

// The fields a FromStd writer reads from the handler's header, as net/http
// reads them: a Content-Type present (even empty) or
// X-Content-Type-Options: nosniff stops sniffing, and a Content-Length
// frames the body.
func TestFromStdWriterReadsHeaderFields(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			switch r.URL.Path {
			case "/nosniff":
				w.Header().Set("X-Content-Type-Options", "nosniff")
			case "/empty-type":
				w.Header()["Content-Type"] = nil
			case "/length":
				w.Header().Set("Content-Length", "14")
				w.(nethttp.Flusher).Flush()
			}
			io.WriteString(w, "<html>hi</html>"[:14])
		})))
		for _, tc := range []struct {
			path, ctype string
			length      int64
		}{
			{"/sniff", "text/html; charset=utf-8", 14},
			{"/nosniff", "", 14},
			{"/empty-type", "", 14},
			{"/length", "", 14}, // flushed before any body: nothing to sniff, as in net/http
		} {
			c, br := rawConn(t, s)
			io.WriteString(c, "GET "+tc.path+" HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, body := readResponse(t, br, "GET")
			require.Equal(t, 200, resp.StatusCode, tc.path)
			require.Equal(t, tc.ctype, resp.Header.Get("Content-Type"), tc.path)
			require.Equal(t, tc.length, resp.ContentLength, tc.path)
			require.Empty(t, resp.TransferEncoding, tc.path)
			require.Equal(t, "<html>hi</html"[:14], body, tc.path)
		}
	})
}
