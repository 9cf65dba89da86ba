package http_test

import (
	"context"
	"io"
	"log/slog"
	nethttp "net/http"
	"os"

	vhttp "github.com/veloq/veloq/http"
	vnet "github.com/veloq/veloq/net"
)

// An access log: one slog record per request, whatever the handler style
// or protocol, written when the answer ends. Here the time, duration,
// client address and sizes are left out so that the output is
// the same at every run; the channel only lets the example wait for the
// line, which is written after the client has its answer.
func ExampleAccessLog() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, "duration", "remote", "bytes_in", "bytes_out":
				return slog.Attr{}
			}
			return a
		},
	}))
	logged := make(chan struct{}, 1)

	r := vhttp.NewRouter()
	r.HandleFunc("GET /hello/{name}", func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		w.WriteString("hello " + string(r.PathValue("name")))
	})
	s, err := vhttp.NewServer(r, vhttp.WithNetOptions(vnet.WithLoops(1)), vhttp.WithCompletion(vhttp.ChainCompletion(
		vhttp.AccessLog(logger),
		func(*vhttp.Completion) { logged <- struct{}{} },
	)))
	if err != nil {
		panic(err)
	}
	if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	resp, err := nethttp.Get("http://" + s.Addr().String() + "/hello/ann")
	if err != nil {
		panic(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	<-logged
	// Output:
	// level=INFO msg="http request" method=GET route="GET /hello/{name}" target=/hello/ann proto=HTTP/1.1 status=200 completed=true
}
