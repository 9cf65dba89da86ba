// Command nbioecho is a TCP echo server on github.com/lesismal/nbio, an
// epoll event-loop library: -loops pollers (default 1) read into a shared
// buffer and call OnData on the poller goroutine, which writes the bytes
// back (nbio keeps what the socket does not take at once). It prints
// "nbioecho: tcp echo on ADDR, N pollers, GOMAXPROCS G, pid P" once
// listening and exits on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/lesismal/nbio"
	"github.com/lesismal/nbio/logging"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9006", "listen address")
	loops := flag.Int("loops", 1, "number of nbio pollers")
	flag.Parse()
	if err := run(*addr, *loops); err != nil {
		fmt.Fprintln(os.Stderr, "nbioecho:", err)
		os.Exit(1)
	}
}

func run(addr string, loops int) error {
	if loops < 1 {
		return fmt.Errorf("-loops %d: want >= 1", loops)
	}
	// nbio logs to stdout at info level by default; stdout carries the
	// readiness line benchrun reads, so its warnings go to stderr.
	logging.Output = os.Stderr
	logging.SetLevel(logging.LevelWarn)
	eng := nbio.NewEngine(nbio.Config{Network: "tcp", Addrs: []string{addr}, NPoller: loops})
	eng.OnData(func(c *nbio.Conn, data []byte) {
		// data is the poller's read buffer, reused after OnData returns;
		// Write either sends it or copies the rest into c's queue.
		if _, err := c.Write(data); err != nil {
			c.Close()
		}
	})
	if err := eng.Start(); err != nil {
		return err
	}
	fmt.Printf("nbioecho: tcp echo on %s, %d pollers, GOMAXPROCS %d, pid %d\n", addr, loops, runtime.GOMAXPROCS(0), os.Getpid())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := eng.Shutdown(sctx)
	fmt.Println("nbioecho: shut down")
	return err
}
