package http_test

import (
	"context"
	"encoding/json"
	"expvar"
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"time"

	vhttp "github.com/veloq/veloq/http"
	vnet "github.com/veloq/veloq/net"
)

// PublishExpvar puts a server's counters among the variables that
// expvar.Handler serves: a program that imports expvar and serves
// net/http's DefaultServeMux has them at /debug/vars.
func ExamplePublishExpvar() {
	s, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		w.WriteString("hello")
	}), vhttp.WithNetOptions(vnet.WithLoops(1)))
	if err != nil {
		panic(err)
	}
	if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())
	vhttp.PublishExpvar("veloq_http_example", s)

	vars := httptest.NewServer(expvar.Handler()) // /debug/vars
	defer vars.Close()

	resp, err := nethttp.Get("http://" + s.Addr().String() + "/")
	if err != nil {
		panic(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	// The server counts a request once its loop's iteration ends, which
	// may be just after the client has the response.
	var all struct {
		Stats vhttp.Stats `json:"veloq_http_example"`
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		resp, err := nethttp.Get(vars.URL)
		if err != nil {
			panic(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&all)
		resp.Body.Close()
		if err != nil {
			panic(err)
		}
		if all.Stats.Requests == 1 {
			break
		}
	}
	fmt.Println("accepted:", all.Stats.Accepted, "requests:", all.Stats.Requests)
	// Output: accepted: 1 requests: 1
}
