// Command gorillaws is the goroutine-per-connection WebSocket baseline:
// gorilla/websocket on net/http, echoing every message with its type on
// any path. Each connection holds a goroutine reading messages and
// gorilla's read and write buffers (1 KiB each here, small on purpose: the
// idle-memory comparison should not be won by buffer sizes). It prints
// "gorillaws: websocket echo on ADDR, GOMAXPROCS N, pid P" once listening
// and exits on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9003", "listen address")
	flag.Parse()
	if err := run(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "gorillaws:", err)
		os.Exit(1)
	}
}

var upgrader = websocket.Upgrader{
	ReadBufferSize:  1024,
	WriteBufferSize: 1024,
	CheckOrigin:     func(*http.Request) bool { return true },
}

// echo copies each message into a writer of the same type, streaming
// through gorilla's buffers without assembling it.
func echo(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	for {
		typ, rd, err := c.NextReader()
		if err != nil {
			return
		}
		wr, err := c.NextWriter(typ)
		if err != nil {
			return
		}
		if _, err := io.Copy(wr, rd); err != nil {
			return
		}
		if err := wr.Close(); err != nil {
			return
		}
	}
}

func run(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(echo), ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("gorillaws: websocket echo on %s, GOMAXPROCS %d, pid %d\n", ln.Addr(), runtime.GOMAXPROCS(0), os.Getpid())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Hijacked connections are not tracked by Shutdown; exiting closes them.
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	fmt.Println("gorillaws: shut down")
	return nil
}
