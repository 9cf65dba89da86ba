package http

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	nethttp "net/http"
	"testing"
	"time"

	vnet "github.com/veloq/veloq/net"
)

// BenchmarkServerFastPath measures the inline handler end to end over a
// loopback connection: a client writes depth pipelined GET requests, the
// server parses and answers them on its loop, the client reads the
// responses. One op is depth requests; allocs/op counts both sides (the
// client's reads and writes allocate nothing).
func BenchmarkServerFastPath(b *testing.B) {
	for _, be := range []vnet.Backend{vnet.BackendEpoll, vnet.BackendUring} {
		for _, depth := range []int{1, 16} {
			b.Run(string(be)+"/depth="+itoa(depth), func(b *testing.B) {
				if be == vnet.BackendUring && vnet.ProbeUring() != nil {
					b.Skip("io_uring unavailable")
				}
				benchFastPath(b, be, depth)
			})
		}
	}
}

func itoa(n int) string {
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(buf[i:])
		}
	}
}

// BenchmarkServerFromStd is BenchmarkServerFastPath for a net/http
// handler served through FromStd: the cost of the adapter (request and
// writer objects, the hand-off to the handler's goroutine and back).
// allocs/op counts the server's allocations per request.
func BenchmarkServerFromStd(b *testing.B) {
	h := FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "Hello, World!")
	}))
	for _, be := range []vnet.Backend{vnet.BackendEpoll, vnet.BackendUring} {
		b.Run(string(be), func(b *testing.B) {
			if be == vnet.BackendUring && vnet.ProbeUring() != nil {
				b.Skip("io_uring unavailable")
			}
			benchServe(b, be, 1, h)
		})
	}
}

// BenchmarkServerFromStdMux is BenchmarkServerFromStd with the handler
// behind a net/http.ServeMux, as most net/http programs have it (and
// echo-server -mode http-std): the mux's routing is what grew a fresh
// goroutine's stack on every request, before handlers ran on reused ones.
func BenchmarkServerFromStdMux(b *testing.B) {
	mux := nethttp.NewServeMux()
	mux.HandleFunc("GET /", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "Hello, World!")
	})
	mux.HandleFunc("POST /echo", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		io.Copy(w, r.Body)
	})
	h := FromStd(mux)
	for _, be := range []vnet.Backend{vnet.BackendEpoll, vnet.BackendUring} {
		b.Run(string(be), func(b *testing.B) {
			if be == vnet.BackendUring && vnet.ProbeUring() != nil {
				b.Skip("io_uring unavailable")
			}
			benchServe(b, be, 1, h)
		})
	}
}

func benchFastPath(b *testing.B, be vnet.Backend, depth int) {
	benchServe(b, be, depth, HandlerFunc(helloHandler))
}

func helloHandler(w *ResponseWriter, r *Request) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteString("Hello, World!")
}

// BenchmarkServerCompletion is BenchmarkServerFastPath at depth 16
// with a completion hook: one that does nothing (the bookkeeping's own
// cost) and the JSON access log into io.Discard.
func BenchmarkServerCompletion(b *testing.B) {
	hooks := map[string]func(*Completion){
		"noop":      func(*Completion) {},
		"accesslog": AccessLog(slog.New(slog.NewJSONHandler(io.Discard, nil))),
	}
	for _, be := range []vnet.Backend{vnet.BackendEpoll, vnet.BackendUring} {
		for name, hook := range hooks {
			b.Run(string(be)+"/"+name, func(b *testing.B) {
				if be == vnet.BackendUring && vnet.ProbeUring() != nil {
					b.Skip("io_uring unavailable")
				}
				benchServeTarget(b, be, 16, HandlerFunc(helloHandler), "/", WithCompletion(hook))
			})
		}
	}
}

// BenchmarkServerRouter is BenchmarkServerFastPath through a Router with
// a dozen routes, the request matching one with two wildcards.
func BenchmarkServerRouter(b *testing.B) {
	m := NewRouter()
	for _, p := range []string{"/", "/users", "/users/{id}", "/users/{id}/posts", "/static/{path...}",
		"/api/v1/items", "/api/v1/items/{item}", "/health", "/metrics", "/login", "/logout"} {
		m.HandleFunc("GET "+p, helloHandler)
	}
	m.HandleFunc("GET /users/{id}/posts/{post}", func(w *ResponseWriter, r *Request) {
		if len(r.PathValue("id")) == 0 || len(r.PathValue("post")) == 0 {
			panic("no wildcard values")
		}
		helloHandler(w, r)
	})
	for _, be := range []vnet.Backend{vnet.BackendEpoll, vnet.BackendUring} {
		b.Run(string(be), func(b *testing.B) {
			if be == vnet.BackendUring && vnet.ProbeUring() != nil {
				b.Skip("io_uring unavailable")
			}
			benchServeTarget(b, be, 16, m, "/users/42/posts/7")
		})
	}
}

func benchServe(b *testing.B, be vnet.Backend, depth int, h Handler) {
	benchServeTarget(b, be, depth, h, "/")
}

func benchServeTarget(b *testing.B, be vnet.Backend, depth int, h Handler, target string, opts ...Option) {
	s := newServer(b, h, append([]Option{WithNetOptions(vnet.WithBackend(be), vnet.WithLoops(1)), WithLogger(testLogger(b))}, opts...)...)
	if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	one := []byte("GET " + target + " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	req := bytes.Repeat(one, depth)

	// Learn a response's length (the Date is fixed-width).
	if _, err := c.Write(one); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	n, err := c.Read(buf)
	if err != nil || !bytes.HasSuffix(buf[:n], []byte("Hello, World!")) {
		b.Fatalf("warm-up response %q: %v", buf[:n], err)
	}
	want := n * depth
	b.ReportAllocs()
	b.SetBytes(int64(len(req)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < want; {
			n, err := c.Read(buf)
			if err != nil && err != io.EOF {
				b.Fatal(err)
			}
			got += n
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*depth)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(float64(depth), "req/op")
}

// BenchmarkServerDetach is BenchmarkServerFastPath (depth 1) for a
// handler that detaches its answer and completes it through the
// Responder: in the handler ("now") and from a callback the loop runs
// after it ("later", one Defer'd function made once, draining a queue, so
// that the count is the Responder's and not the test's closures).
func BenchmarkServerDetach(b *testing.B) {
	body := []byte("Hello, World!")
	now := HandlerFunc(func(w *ResponseWriter, r *Request) {
		d, _ := w.Detach()
		d.Header().Set("Content-Type", "text/plain")
		d.Respond(StatusOK, body)
	})
	var queue []*Responder
	var loop *vnet.Loop
	drain := func() {
		for i, d := range queue {
			d.Header().Set("Content-Type", "text/plain")
			d.Respond(StatusOK, body)
			queue[i] = nil
		}
		queue = queue[:0]
	}
	later := HandlerFunc(func(w *ResponseWriter, r *Request) {
		d, _ := w.Detach()
		if len(queue) == 0 {
			loop = d.Loop()
			loop.Defer(drain)
		}
		queue = append(queue, d)
	})
	for _, be := range []vnet.Backend{vnet.BackendEpoll, vnet.BackendUring} {
		for name, h := range map[string]Handler{"now": now, "later": later} {
			b.Run(string(be)+"/"+name, func(b *testing.B) {
				if be == vnet.BackendUring && vnet.ProbeUring() != nil {
					b.Skip("io_uring unavailable")
				}
				benchServe(b, be, 1, h)
			})
		}
	}
}
