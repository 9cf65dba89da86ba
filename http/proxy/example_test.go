//go:build unix

package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/http/proxy"
	vnet "github.com/veloq/veloq/net"
)

// A reverse proxy to a local upstream, mounted on a Router beside a
// route of its own.
func Example() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream saw %s from %s", r.URL.Path, r.Header.Get("X-Forwarded-For"))
	}))
	defer ln.Close()

	p, err := proxy.New(proxy.WithUpstreams(ln.Addr().String()), proxy.WithPolicy(proxy.LeastOutstanding))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	mux := vhttp.NewRouter()
	mux.HandleFunc("GET /healthz", func(w *vhttp.ResponseWriter, r *vhttp.Request) { w.WriteString("ok") })
	mux.Handle("/", p)
	s, err := vhttp.NewServer(mux, vhttp.WithNetOptions(vnet.WithLoops(1)))
	if err != nil {
		fmt.Println(err)
		return
	}
	addr, err := s.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Shutdown(context.Background())

	resp, err := http.Get("http://" + addr.String() + "/api/items")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 upstream saw /api/items from 127.0.0.1
}
