// Command echo-server is veloq's reference server: a TCP echo server (the
// default) for load generators, served by one reactor loop per CPU.
//
//	go run ./cmd/echo-server                 # TCP echo on 127.0.0.1:9000
//	go run ./cmd/echo-server -backend epoll -loops 1 -pin
//
// It prints the backend and loop count when it starts and stops cleanly on
// SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	vnet "github.com/veloq/veloq/net"
	"github.com/veloq/veloq/reactor"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "echo-server:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("echo-server", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9000", "listen address (host:port, or a path with -network unix)")
	network := fs.String("network", "tcp", "tcp, tcp4, tcp6 or unix")
	loops := fs.Int("loops", runtime.NumCPU(), "number of reactor loops")
	backend := fs.String("backend", "auto", "I/O backend: auto, uring or epoll")
	pin := fs.Bool("pin", false, "pin each loop to its own CPU")
	verbose := fs.Bool("v", false, "log at debug level")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := reactor.ParseBackend(*backend)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	h := &vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
		in, _ := c.Next(-1)
		c.Write(in)
	}}
	s, err := vnet.Listen(*network, *addr, h,
		vnet.WithLoops(*loops), vnet.WithBackend(b), vnet.WithPin(*pin), vnet.WithLogger(logger))
	if err != nil {
		return err
	}
	fmt.Printf("echo-server: tcp echo on %s, backend %s, %d loops, pid %d\n", s.Addr(), s.Backend(), *loops, os.Getpid())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	fmt.Println("echo-server: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Shutdown(sctx)
}
