// Command fasthttp is the valyala/fasthttp peer for HTTP benchmarks: GET /
// answers "Hello, World!" as text/plain, like echo-server -mode http, other
// paths 404 and other methods 405. fasthttp serves each connection on a
// goroutine from its worker pool (no event loop), with its own request
// parser and reused request and response objects; with the process pinned
// to one CPU, GOMAXPROCS is 1. It prints "fasthttp: http on ADDR,
// GOMAXPROCS G, pid P" once listening and exits on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8083", "listen address")
	flag.Parse()
	if err := run(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "fasthttp:", err)
		os.Exit(1)
	}
}

var hello = []byte("Hello, World!")

func handle(ctx *fasthttp.RequestCtx) {
	switch {
	case !ctx.IsGet():
		ctx.Error("method not allowed", fasthttp.StatusMethodNotAllowed)
	case string(ctx.Path()) != "/":
		ctx.Error("not found", fasthttp.StatusNotFound)
	default:
		ctx.SetContentType("text/plain")
		ctx.SetBody(hello)
	}
}

func run(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &fasthttp.Server{Handler: handle, Name: "fasthttp", ReadTimeout: time.Minute, CloseOnShutdown: true}
	fmt.Printf("fasthttp: http on %s, GOMAXPROCS %d, pid %d\n", ln.Addr(), runtime.GOMAXPROCS(0), os.Getpid())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.ShutdownWithContext(sctx)
	fmt.Println("fasthttp: shut down")
	return err
}
