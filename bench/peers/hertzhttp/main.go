// Command hertzhttp is the cloudwego/hertz peer for HTTP benchmarks: GET /
// answers "Hello, World!" as text/plain, like echo-server -mode http.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/cloudwego/hertz/pkg/app/server"
	"github.com/cloudwego/hertz/pkg/common/hlog"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen address")
	flag.Parse()
	hlog.SetSilentMode(true)
	h := server.Default(server.WithHostPorts(*addr), server.WithExitWaitTime(time.Second), server.WithDisablePrintRoute(true))
	hello := []byte("Hello, World!")
	h.GET("/", func(ctx context.Context, c *app.RequestContext) {
		c.Data(200, "text/plain", hello)
	})
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		h.Shutdown(sctx)
		os.Exit(0)
	}()
	fmt.Printf("hertzhttp: http on %s, pid %d\n", *addr, os.Getpid())
	h.Spin()
}
