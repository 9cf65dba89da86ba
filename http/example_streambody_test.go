package http_test

import (
	"context"
	"fmt"
	"io"
	nethttp "net/http"
	"strings"
	"time"

	vhttp "github.com/veloq/veloq/http"
	vnet "github.com/veloq/veloq/net"
)

// Under StreamBody, a handler gets the request body in parts on the
// loop, however large it is, and paces it: here it counts the bytes and
// pauses after each part for a millisecond, as a consumer that writes
// them somewhere slower would. The server reads the client no faster.
func ExampleStreamBody() {
	count := vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		rs, err := w.Detach()
		if err != nil {
			w.WriteHeader(vhttp.StatusInternalServerError)
			return
		}
		var n int
		rs.OnBody(func(part []byte, end bool, err error) {
			n += len(part)
			switch {
			case err != nil:
				rs.Fail(vhttp.ErrorStatus(err))
			case end:
				rs.Respond(vhttp.StatusOK, fmt.Appendf(nil, "%d bytes", n))
			default:
				rs.PauseBody()
				rs.Loop().AfterFunc(time.Millisecond, rs.ResumeBody)
			}
		})
	})
	s, err := vhttp.NewServer(vhttp.StreamBody(count, 1<<30), vhttp.WithNetOptions(vnet.WithLoops(1)))
	if err != nil {
		panic(err)
	}
	if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	body := strings.NewReader(strings.Repeat("x", 10<<20)) // above Limits.MaxBodyBytes
	resp, err := nethttp.Post("http://"+s.Addr().String()+"/upload", "application/octet-stream", body)
	if err != nil {
		panic(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, string(answer))
	// Output: 200 OK 10485760 bytes
}
