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
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/veloq/veloq/executor"
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
	mode := fs.String("mode", "tcp", "tcp (echo) or http (GET / hello, POST /echo)")
	work := fs.Int("work", 0, "CPU cost per echoed message: rounds of hashing over it")
	offload := fs.Bool("offload", false, "with -work, hash on the work-stealing pool instead of the loop")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	workers := fs.Int("workers", runtime.NumCPU(), "work-stealing pool size (with -offload)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Handle signals before announcing the server, so a supervisor's
	// SIGTERM right after the start line still stops it cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := reactor.ParseBackend(*backend)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	if *mode == "http" {
		return runHTTP(ctx, httpConfig{addr: *addr, network: *network, loops: *loops, backend: b, pin: *pin, logger: logger})
	}
	if *mode != "tcp" {
		return fmt.Errorf("-mode must be tcp or http, not %q", *mode)
	}
	var h vnet.Handler = &vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
		in, _ := c.Next(-1)
		c.Write(in)
	}}
	var pool *executor.Pool
	switch {
	case *work > 0 && *offload:
		pool = executor.NewPool(executor.WithWorkers(*workers), executor.WithLogger(logger))
		h = offloadEcho(pool, *work)
	case *work > 0:
		h = inlineEcho(*work)
	}
	s, err := vnet.Listen(*network, *addr, h,
		vnet.WithLoops(*loops), vnet.WithBackend(b), vnet.WithPin(*pin), vnet.WithLogger(logger))
	if err != nil {
		return err
	}
	desc := "tcp echo"
	if *work > 0 {
		where := "inline"
		if *offload {
			where = fmt.Sprintf("offloaded to %d workers", *workers)
		}
		desc = fmt.Sprintf("tcp echo with %d rounds of work per message, %s,", *work, where)
	}
	fmt.Printf("echo-server: %s on %s, backend %s, %d loops, pid %d\n", desc, s.Addr(), s.Backend(), *loops, os.Getpid())

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	<-ctx.Done()
	fmt.Println("echo-server: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, st := range s.Stats() {
		fmt.Printf("echo-server: loop %d (%s): %d accepted, %d bytes in, %d bytes out, %d iterations, %d parks, %d wake-ups, %d completions, %d panics\n",
			st.ID, st.Backend, st.Accepted, st.BytesIn, st.BytesOut, st.Iterations, st.Parks, st.Wakeups, st.Completions, st.Panics)
	}
	err = s.Shutdown(sctx)
	if pool != nil {
		pool.Shutdown(sctx)
	}
	return err
}

// burn is the CPU cost of a message: rounds of FNV-1a over it. The result
// is returned so the compiler cannot drop the work.
func burn(p []byte, rounds int) uint64 {
	h := uint64(14695981039346656037)
	for r := 0; r < rounds; r++ {
		for _, b := range p {
			h ^= uint64(b)
			h *= 1099511628211
		}
	}
	return h
}

// inlineEcho does the work on the loop: simple, and it stalls every other
// connection on that loop while it runs.
func inlineEcho(rounds int) vnet.Handler {
	var sink uint64
	return &vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
		in, _ := c.Next(-1)
		sink += burn(in, rounds)
		c.Write(in)
	}}
}

// offloadEcho hashes on the stealable pool and echoes from the loop when
// the work comes back; the connection's input is held meanwhile, so echoes
// keep their order.
func offloadEcho(pool *executor.Pool, rounds int) vnet.Handler {
	return &vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
		in, _ := c.Next(-1)
		msg := append([]byte(nil), in...) // the view dies with the callback
		vnet.Offload(context.Background(), c, pool, func(context.Context) (uint64, error) {
			return burn(msg, rounds), nil
		}, func(c *vnet.Conn, _ uint64, err error) {
			if err == nil {
				c.Write(msg)
			}
		})
	}}
}
