// Command nbiohttp is the lesismal/nbio peer for HTTP benchmarks: nbhttp,
// nbio's HTTP/1.1 server on its epoll loops, with a net/http handler: GET /
// answers "Hello, World!" as text/plain, like echo-server -mode http. It
// runs -loops pollers (default 1), which read and parse requests; handlers
// run on nbhttp's default executor (its goroutine pool). It prints
// "nbiohttp: http on ADDR, N pollers, GOMAXPROCS G, pid P" once listening
// and exits on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/lesismal/nbio/logging"
	"github.com/lesismal/nbio/nbhttp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8084", "listen address")
	loops := flag.Int("loops", 1, "number of nbio pollers")
	inline := flag.Bool("inline", false, "run handlers on the poller goroutine that parsed the request instead of nbhttp's goroutine pool")
	flag.Parse()
	if err := run(*addr, *loops, *inline); err != nil {
		fmt.Fprintln(os.Stderr, "nbiohttp:", err)
		os.Exit(1)
	}
}

func run(addr string, loops int, inline bool) error {
	if loops < 1 {
		return fmt.Errorf("-loops %d: want >= 1", loops)
	}
	// nbio logs to stdout at info level by default; stdout carries the
	// readiness line benchrun reads, so its warnings go to stderr.
	logging.Output = os.Stderr
	logging.SetLevel(logging.LevelWarn)
	hello := []byte("Hello, World!")
	length := strconv.Itoa(len(hello))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		// An explicit length, as the other peers send: without it nbhttp
		// answers with a chunked body.
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", length)
		w.Write(hello)
	})
	conf := nbhttp.Config{Network: "tcp", Addrs: []string{addr}, NPoller: loops, Handler: mux}
	executor := "goroutine pool"
	if inline {
		conf.ServerExecutor = func(f func()) { f() }
		executor = "inline"
	}
	eng := nbhttp.NewEngine(conf)
	if err := eng.Start(); err != nil {
		return err
	}
	fmt.Printf("nbiohttp: http on %s, %d pollers, handlers %s, GOMAXPROCS %d, pid %d\n", addr, loops, executor, runtime.GOMAXPROCS(0), os.Getpid())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := eng.Shutdown(sctx)
	fmt.Println("nbiohttp: shut down")
	return err
}
