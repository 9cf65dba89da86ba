package http_test

import (
	"context"
	"fmt"
	"io"
	nethttp "net/http"
	"strings"
	"time"

	vhttp "github.com/veloq/veloq/http"
)

// A fast handler runs inline on the loop: the request is a view into the
// connection's input and nothing is allocated.
func ExampleServer() {
	s := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s, %d body bytes", r.Method, r.Path, len(r.Body))
	}), vhttp.WithLoops(1), vhttp.WithReadHeaderTimeout(5*time.Second))
	if err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
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
	s := vhttp.NewServer(vhttp.FromStd(mux), vhttp.WithLoops(1))
	if err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
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
