package http_test

import (
	"context"
	"fmt"
	"io"
	nethttp "net/http"
	"time"

	vhttp "github.com/veloq/veloq/http"
	vnet "github.com/veloq/veloq/net"
)

// A handler detaches its answer and returns at once; a timer on the same
// loop completes it later, with no goroutine waiting. A proxy does the
// same from the callbacks of its upstream connection.
func ExampleResponseWriter_Detach() {
	s, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		rs, err := w.Detach()
		if err != nil {
			w.WriteHeader(vhttp.StatusInternalServerError)
			return
		}
		timer := rs.Loop().AfterFunc(20*time.Millisecond, func() {
			rs.Header().Set("Content-Type", "text/plain")
			rs.WriteHead(vhttp.StatusOK, -1) // streamed: chunked
			fmt.Fprintf(rs, "answered later, ")
			rs.Write([]byte("in two parts"))
			rs.End()
		})
		rs.OnGone(func() { timer.Stop() }) // the client left: nothing to do
	}), vhttp.WithNetOptions(vnet.WithLoops(1)))
	if err != nil {
		panic(err)
	}
	if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	resp, err := nethttp.Get("http://" + s.Addr().String() + "/")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, resp.TransferEncoding, string(body))
	// Output: 200 OK [chunked] answered later, in two parts
}
