package http_test

import (
	"context"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"strings"
	"time"

	vhttp "github.com/veloq/veloq/http"
	vnet "github.com/veloq/veloq/net"
)

// A Server serves a Handler on veloq's loops. A fast handler like this one
// runs inline on the loop: the request is a view into the
// connection's input and nothing is allocated.
func Example() {
	s, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s, %d body bytes", r.Method, r.Path, len(r.Body))
	}), vhttp.WithNetOptions(vnet.WithLoops(1)), vhttp.WithReadHeaderTimeout(5*time.Second))
	if err != nil {
		panic(err)
	}
	if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	resp, err := nethttp.Post("http://"+s.Addr().String()+"/hello", "text/plain", strings.NewReader("veloq"))
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, string(body))
	// Output: 200 OK POST /hello, 5 body bytes
}

// FromStd serves any net/http handler, here a ServeMux with method and
// path patterns. Each request runs on a goroutine of its own, so handlers
// may block.
func ExampleFromStd() {
	mux := nethttp.NewServeMux()
	mux.HandleFunc("GET /users/{id}", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		fmt.Fprintf(w, "user %s", r.PathValue("id"))
	})
	s, err := vhttp.NewServer(vhttp.FromStd(mux), vhttp.WithNetOptions(vnet.WithLoops(1)))
	if err != nil {
		panic(err)
	}
	if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	resp, err := nethttp.Get("http://" + s.Addr().String() + "/users/42")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, string(body))
	// Output: 200 OK user 42
}

// ListenAndServe serves until its context ends (in a program, a
// signal.NotifyContext for Ctrl-C), then shuts down gracefully: the
// requests in progress finish first.
func ExampleListenAndServe() {
	ctx, stop := context.WithCancel(context.Background()) // signal.NotifyContext(ctx, os.Interrupt) in main
	h := vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteString("Hello, World!")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0") // find a free port for the example
	if err != nil {
		panic(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	served := make(chan error, 1)
	go func() {
		served <- vhttp.ListenAndServe(ctx, "tcp", addr, h, 5*time.Second, vhttp.WithNetOptions(vnet.WithLoops(1)))
	}()
	var resp *nethttp.Response
	for range 100 { // until the server listens
		if resp, err = nethttp.Get("http://" + addr + "/"); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, string(body))

	stop() // Ctrl-C
	fmt.Println("shut down:", <-served)
	// Output:
	// 200 OK Hello, World!
	// shut down: <nil>
}

// A Router matches Go 1.22 ServeMux patterns without allocating; its
// middleware is plain function composition.
func ExampleRouter() {
	m := vhttp.NewRouter()
	m.HandleFunc("GET /users/{id}", func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		fmt.Fprintf(w, "user %s", r.PathValue("id"))
	})
	m.HandleFunc("GET /files/{path...}", func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		fmt.Fprintf(w, "file %s", r.PathValue("path"))
	})
	logged := func(next vhttp.Handler) vhttp.Handler {
		return vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
			w.Header().Set("X-Served-By", "veloq")
			next.ServeHTTP(w, r)
		})
	}
	s, err := vhttp.NewServer(vhttp.Chain(m, logged), vhttp.WithNetOptions(vnet.WithLoops(1)))
	if err != nil {
		panic(err)
	}
	if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	for _, req := range []struct{ method, path string }{
		{"GET", "/users/42"}, {"GET", "/files/a/b.txt"}, {"DELETE", "/users/42"}, {"GET", "/nope"},
	} {
		hreq, _ := nethttp.NewRequest(req.method, "http://"+s.Addr().String()+req.path, nil)
		resp, err := nethttp.DefaultClient.Do(hreq)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s %s: %d %q allow=%q\n", req.method, req.path, resp.StatusCode, body, resp.Header.Get("Allow"))
	}
	// Output:
	// GET /users/42: 200 "user 42" allow=""
	// GET /files/a/b.txt: 200 "file a/b.txt" allow=""
	// DELETE /users/42: 405 "" allow="GET, HEAD"
	// GET /nope: 404 "" allow=""
}
