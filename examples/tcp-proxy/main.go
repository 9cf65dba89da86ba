// Command tcp-proxy forwards TCP connections to a set of backends on
// veloq's reactor loops (see package proxy for how).
//
//	go run ./examples/tcp-proxy -listen 127.0.0.1:8000 -backends 127.0.0.1:9000,127.0.0.1:9001
//	go run ./examples/tcp-proxy -listen 127.0.0.1:8000 -backends 127.0.0.1:9000 -loops 1 -backend uring -splice large
//
// It prints one line when it starts and its counters when it stops on
// SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/veloq/veloq/examples/tcp-proxy/proxy"
	vnet "github.com/veloq/veloq/net"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tcp-proxy:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("tcp-proxy", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8000", "address to accept clients on")
	backends := fs.String("backends", "", "comma-separated backend addresses (host:port), used round-robin")
	loops := fs.Int("loops", runtime.NumCPU(), "number of reactor loops")
	backend := fs.String("backend", "auto", "I/O backend: auto, uring or epoll")
	pin := fs.Bool("pin", false, "pin each loop to its own CPU")
	dialTimeout := fs.Duration("dial-timeout", 5*time.Second, "timeout for each backend connect")
	cooldown := fs.Duration("cooldown", 2*time.Second, "how long a backend whose connect failed is skipped")
	splice := fs.String("splice", "off", "zero-copy forwarding with splice(2): off, large (a direction switches after a large read) or always")
	recvBuf := fs.Int("recv-buffer", 64<<10, "io_uring receive buffer size (bytes; 64 buffers per loop): larger ones mean fewer completions per large message")
	batchWait := fs.Duration("batch-wait", 0, "how long a busy loop may hold a wake-up back to take events in a batch (0: the default, 20µs; negative: off)")
	verbose := fs.Bool("v", false, "log at debug level")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *backends == "" {
		return errors.New("-backends is required (host:port[,host:port...])")
	}
	// Handle signals before announcing, so a SIGTERM right after the start
	// line still stops the proxy cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := vnet.ParseBackend(*backend)
	if err != nil {
		return err
	}
	mode, err := proxy.ParseSpliceMode(*splice)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	p, err := proxy.New(strings.Split(*backends, ","), proxy.WithDialTimeout(*dialTimeout),
		proxy.WithCooldown(*cooldown), proxy.WithSplice(mode), proxy.WithLogger(logger))
	if err != nil {
		return err
	}
	if *recvBuf < 4096 || *recvBuf > 1<<20 {
		return fmt.Errorf("-recv-buffer %d: want 4 KiB to 1 MiB", *recvBuf)
	}
	s, err := vnet.Listen("tcp", *listen, p, vnet.WithBackend(b), vnet.WithLogger(logger),
		vnet.WithLoopConfig(vnet.Config{RecvBufferSize: *recvBuf, RecvBuffers: 64}),
		vnet.WithLoops(*loops), vnet.WithPin(*pin), vnet.WithBatchWait(*batchWait))
	if err != nil {
		return err
	}
	fmt.Printf("tcp-proxy: listening on %s, backends %s, backend %s, %d loops, splice %s, pid %d\n",
		s.Addr(), strings.Join(p.Backends(), ","), s.Backend(), *loops, mode, os.Getpid())

	<-ctx.Done()
	st := p.Stats()
	fmt.Printf("tcp-proxy: stopping: %d accepted, %d active, %d connected, %d dial failures, %d without backend, %d bytes up, %d bytes down, peak queue %d bytes\n",
		st.Accepted, st.Active, st.Connected, st.DialFailures, st.NoBackend, st.BytesUp, st.BytesDown, st.PeakQueued)
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
