// Command netpollecho is a TCP echo server on github.com/cloudwego/netpoll,
// the event-loop network library under Kitex and Hertz. It runs -loops
// pollers (default 1) with netpoll's default handler runner (a goroutine
// pool). It prints "netpollecho: tcp echo on ADDR, N pollers, pid P" once
// listening and exits on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/cloudwego/netpoll"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9002", "listen address")
	loops := flag.Int("loops", 1, "number of netpoll pollers")
	flag.Parse()
	if err := run(*addr, *loops); err != nil {
		fmt.Fprintln(os.Stderr, "netpollecho:", err)
		os.Exit(1)
	}
}

func run(addr string, loops int) error {
	if loops < 1 {
		return fmt.Errorf("-loops %d: want >= 1", loops)
	}
	if err := netpoll.Configure(netpoll.Config{PollerNum: loops, LoggerOutput: io.Discard}); err != nil {
		return err
	}
	ln, err := netpoll.CreateListener("tcp", addr)
	if err != nil {
		return err
	}
	loop, err := netpoll.NewEventLoop(onRequest)
	if err != nil {
		return err
	}
	fmt.Printf("netpollecho: tcp echo on %s, %d pollers, GOMAXPROCS %d, pid %d\n", ln.Addr(), loops, runtime.GOMAXPROCS(0), os.Getpid())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- loop.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = loop.Shutdown(sctx)
	fmt.Println("netpollecho: shut down")
	return err
}

// onRequest echoes everything readable: copy into the writer's buffer,
// release the reader's, flush.
func onRequest(_ context.Context, c netpoll.Connection) error {
	r, w := c.Reader(), c.Writer()
	n := r.Len()
	if n == 0 {
		return nil
	}
	in, err := r.Next(n)
	if err != nil {
		return err
	}
	out, err := w.Malloc(n)
	if err != nil {
		return err
	}
	copy(out, in)
	if err := r.Release(); err != nil {
		return err
	}
	return w.Flush()
}
