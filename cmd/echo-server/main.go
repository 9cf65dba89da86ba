// Command echo-server is veloq's reference server: a TCP echo server (the
// default) for load generators, served by one reactor loop per CPU.
//
//	go run ./cmd/echo-server                 # TCP echo on 127.0.0.1:9000
//	go run ./cmd/echo-server -backend epoll -loops 1 -pin
//	go run ./cmd/echo-server -mode ws        # WebSocket echo on any path; GET / says hello
//	go run ./cmd/echo-server -mode http -tls-self-signed   # HTTPS with a fresh certificate
//	go run ./cmd/echo-server -mode udp       # UDP echo: every datagram back to its sender
//
// -tls-cert FILE -tls-key FILE serve every mode over TLS (HTTPS, WSS, TLS
// echo); -tls-self-signed makes an ECDSA P-256 certificate for localhost
// at start, for benchmarks.
//
// It prints the backend and loop count when it starts and stops cleanly on
// SIGINT or SIGTERM.
//
// On SIGUSR2 (nginx's signal for a binary upgrade) it restarts without
// dropping a connection: it starts the program anew (the binary now at
// its path) with its listening sockets (package upgrade), and once the
// new process serves, stops accepting, finishes what is open and exits:
//
//	go build -o /usr/local/bin/echo-server ./cmd/echo-server  # the new binary
//	kill -USR2 $(pgrep -o echo-server)                        # the restart
//
// If the new process fails to start or to get ready, the old one says why
// on stderr and serves on.
//
// -work N gives every echoed message a CPU cost (N rounds of hashing over
// it), run inline on the loop or, with -offload, on the work-stealing pool
// (-workers, -steal=false to turn stealing off). -heavy-every K makes every
// K-th accepted connection heavy: its messages cost -heavy-factor (100)
// times -work. That is the uneven load bench/heavy.sh uses to compare
// inline handlers with offloading, and stealing with no stealing:
//
//	go run ./cmd/echo-server -loops 1 -work 40 -offload -workers 2 -heavy-every 10
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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/veloq/veloq/executor"
	"github.com/veloq/veloq/internal/profile"
	vnet "github.com/veloq/veloq/net"
	"github.com/veloq/veloq/upgrade"
)

// signalsHelp ends -help.
const signalsHelp = `
Signals:
  SIGINT, SIGTERM  stop accepting, finish open connections (5 s at most), exit
  SIGUSR2          zero-downtime restart (as nginx's binary upgrade): start the
                   program at this path anew with the listening sockets, and once
                   it serves, stop as on SIGTERM; if it fails, serve on`

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "echo-server:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("echo-server", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9000", "listen address (host:port, or a path with -network unix)")
	network := fs.String("network", "tcp", "tcp, tcp4, tcp6 or unix (-mode udp: udp, udp4, udp6 or unixgram; tcp means udp)")
	loops := fs.Int("loops", runtime.NumCPU(), "number of reactor loops")
	backend := fs.String("backend", "auto", "I/O backend: auto, uring, epoll or portable")
	pin := fs.Bool("pin", false, "pin each loop to its own CPU")
	batchWait := fs.Duration("batch-wait", 0, "how long a busy loop may hold a wake-up back to take events in a batch (0: the default, 20µs; negative: off)")
	verbose := fs.Bool("v", false, "log at debug level")
	mode := fs.String("mode", "tcp", "tcp (echo), http (GET / hello, POST /echo), http-std (the same as a net/http handler through FromStd) ws (WebSocket echo on any path, and http) or udp (datagram echo)")
	gso := fs.Bool("gso", true, "with -mode udp, send runs of same-size datagrams as one (UDP_SEGMENT) where the kernel can")
	gro := fs.Bool("gro", true, "with -mode udp, let the kernel coalesce received datagrams (UDP_GRO) where it can")
	static := fs.String("static", "", "with -mode http, serve the files of this directory (vhttp.FileServer) instead of GET / and POST /echo")
	wsCompress := fs.Bool("ws-compress", false, "with -mode ws, negotiate permessage-deflate when clients offer it")
	work := fs.Int("work", 0, "CPU cost per echoed message: rounds of hashing over it")
	offload := fs.Bool("offload", false, "with -work, hash on the work-stealing pool instead of the loop")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (any mode)")
	memprofile := fs.String("memprofile", "", "when asked to stop, write a heap profile to this file (after a GC, before any connection closes: what the open connections hold)")
	memprofilerate := fs.Int("memprofilerate", 0, "with -memprofile, sample an allocation every this many bytes on average (runtime.MemProfileRate; 0: Go's default, 512 KiB; 1: every one), as go test -memprofilerate")
	workers := fs.Int("workers", runtime.NumCPU(), "work-stealing pool size (with -offload)")
	heavyEvery := fs.Int("heavy-every", 0, "with -work, every K-th accepted connection is heavy (0: none)")
	heavyFactor := fs.Int("heavy-factor", 100, "a heavy connection's messages cost this many times -work")
	steal := fs.Bool("steal", true, "with -offload, idle workers steal queued tasks from busy ones (false: a task waits for the worker it was placed on)")
	var tf tlsFlags
	fs.StringVar(&tf.cert, "tls-cert", "", "serve over TLS with this PEM certificate (chain) file, with -tls-key")
	fs.StringVar(&tf.key, "tls-key", "", "the PEM private key of -tls-cert")
	fs.BoolVar(&tf.selfSigned, "tls-self-signed", false, "serve over TLS with a self-signed ECDSA P-256 certificate made at start (for benchmarks; clients skip verification)")
	fs.BoolVar(&tf.offLoop, "tls-handshake-off-loop", false, "run TLS handshakes on goroutines instead of on the loop (vnet.WithTLSHandshakeOffLoop)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage of echo-server:")
		fs.PrintDefaults()
		fmt.Fprintln(fs.Output(), signalsHelp)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *heavyEvery < 0 || *heavyFactor < 1 {
		return fmt.Errorf("-heavy-every must be >= 0 and -heavy-factor >= 1")
	}
	if *heavyEvery > 0 && *work <= 0 {
		return fmt.Errorf("-heavy-every needs -work: heavy connections cost -heavy-factor times -work")
	}
	// Handle signals before announcing the server, so a supervisor's
	// SIGTERM right after the start line still stops it cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	upg, err := upgrade.New()
	if err != nil {
		return err
	}
	// Done also once an upgrade on SIGUSR2 succeeded: this process then
	// shuts down gracefully as on SIGTERM.
	ctx = upg.UpgradeOn(ctx, func(err error) {
		fmt.Fprintln(os.Stderr, "echo-server: upgrade failed, serving on:", err)
	}, upgradeSignals...)
	if *memprofile != "" {
		if *memprofilerate > 0 {
			runtime.MemProfileRate = *memprofilerate
		}
		ctx = profile.HeapAtStop(ctx, *memprofile, "echo-server", os.Stderr)
	}
	b, err := vnet.ParseBackend(*backend)
	if err != nil {
		return err
	}
	// Every mode profiles its whole run, so FromStd (-mode http-std) can
	// be profiled as the TCP echo always could.
	stopProfile, err := profile.StartCPU(*cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	tlsCfg, err := tf.config()
	if err != nil {
		return err
	}

	if *mode == "http" || *mode == "http-std" || *mode == "ws" {
		return runHTTP(ctx, httpConfig{upg: upg, addr: *addr, network: *network, loops: *loops, backend: b, pin: *pin, batchWait: *batchWait, logger: logger,
			std: *mode == "http-std", ws: *mode == "ws", wsCompress: *wsCompress, tls: tlsCfg, tlsOffLoop: tf.offLoop, static: *static})
	}
	if *static != "" {
		return fmt.Errorf("-static needs -mode http")
	}
	if *mode == "udp" {
		return runUDP(ctx, udpConfig{upg: upg, addr: *addr, network: *network, loops: *loops, backend: b, pin: *pin, gso: *gso, gro: *gro,
			logger: logger, opts: []vnet.Option{vnet.WithBatchWait(*batchWait)}})
	}
	if *mode != "tcp" {
		return fmt.Errorf("-mode must be tcp, http, http-std, ws or udp, not %q", *mode)
	}
	var h vnet.Handler = &vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
		in, _ := c.Next(-1)
		c.Write(in)
	}}
	var pool *executor.Pool
	costs := &costModel{work: *work, heavyEvery: *heavyEvery, heavyFactor: *heavyFactor}
	switch {
	case *work > 0 && *offload:
		pool = executor.NewPool(executor.WithWorkers(*workers), executor.WithLogger(logger),
			executor.WithStealing(*steal))
		h = offloadEcho(pool, costs)
	case *work > 0:
		h = inlineEcho(costs)
	}
	opts := []vnet.Option{vnet.WithLoops(*loops), vnet.WithBackend(b), vnet.WithPin(*pin), vnet.WithBatchWait(*batchWait), vnet.WithLogger(logger)}
	desc := "tcp echo"
	if tlsCfg != nil {
		opts = append(opts, vnet.WithTLS(tlsCfg))
		if tf.offLoop {
			opts = append(opts, vnet.WithTLSHandshakeOffLoop(true))
		}
		desc = "tls echo"
	}
	s, err := vnet.NewServer(h, opts...)
	if err != nil {
		return err
	}
	if _, err := upg.Listen(s, *network, *addr); err != nil {
		return errors.Join(err, s.Close())
	}
	if err := upg.Ready(); err != nil {
		return errors.Join(err, s.Close())
	}
	if *work > 0 {
		where := "inline"
		if *offload {
			where = fmt.Sprintf("offloaded to %d workers (stealing %s)", *workers, onOff(*steal))
		}
		heavy := ""
		if *heavyEvery > 0 {
			heavy = fmt.Sprintf(" (x%d on one connection in %d)", *heavyFactor, *heavyEvery)
		}
		desc = fmt.Sprintf("%s with %d rounds of work per message%s, %s,", desc, *work, heavy, where)
	}
	fmt.Printf("echo-server: %s on %s, backend %s, %s, pid %d\n", desc, s.Addr(), s.Backend(), loopCount(len(s.Loops())), os.Getpid())

	<-ctx.Done()
	fmt.Println("echo-server: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, st := range s.Stats() {
		fmt.Printf("echo-server: loop %d (%s): %d accepted, %d bytes in, %d bytes out, %d iterations, %d parks, %d wake-ups, %d completions, %d panics\n",
			st.ID, st.Backend, st.Accepted, st.BytesIn, st.BytesOut, st.Iterations, st.Parks, st.Wakeups, st.Completions, st.Panics)
	}
	if pool != nil {
		ps := pool.Stats()
		fmt.Printf("echo-server: pool: %d workers, %d executed, %d stolen, %d steal attempts, %d parks\n",
			len(ps.Workers), ps.Executed, ps.Stolen, ps.StealAttempts, ps.Parks)
	}
	err = s.Shutdown(sctx)
	if pool != nil {
		pool.Shutdown(sctx)
	}
	return err
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// costModel gives each connection its cost per message: -work rounds, or
// -heavy-factor times that for every -heavy-every'th accepted connection.
// The cost is decided once, when the connection opens, and kept in its
// context.
type costModel struct {
	work, heavyEvery, heavyFactor int
	accepted                      atomic.Uint64
}

// open counts an accepted connection and records its cost in c.
func (m *costModel) open(c *vnet.Conn) { c.SetValue(m.next()) }

// next returns the cost of the next accepted connection.
func (m *costModel) next() *connCost {
	n := m.accepted.Add(1)
	if m.heavyEvery > 0 && n%uint64(m.heavyEvery) == 0 {
		return &connCost{rounds: m.work * m.heavyFactor}
	}
	return &connCost{rounds: m.work}
}

type connCost struct{ rounds int }

func rounds(c *vnet.Conn) int { return c.Value().(*connCost).rounds }

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
func inlineEcho(costs *costModel) vnet.Handler {
	var sink uint64
	return &vnet.HandlerFuncs{Open: costs.open, Data: func(c *vnet.Conn) {
		in, _ := c.Next(-1)
		sink += burn(in, rounds(c))
		c.Write(in)
	}}
}

// offloadEcho hashes on the stealable pool and echoes from the loop when
// the work comes back; the connection's input is held meanwhile, so echoes
// keep their order.
func offloadEcho(pool *executor.Pool, costs *costModel) vnet.Handler {
	return &vnet.HandlerFuncs{Open: costs.open, Data: func(c *vnet.Conn) {
		in, _ := c.Next(-1)
		msg := append([]byte(nil), in...) // the view dies with the callback
		r := rounds(c)
		vnet.Offload(context.Background(), pool, c, func(context.Context) (uint64, error) {
			return burn(msg, r), nil
		}, func(c *vnet.Conn, _ uint64, err error) {
			if err == nil {
				c.Write(msg)
			}
		})
	}}
}

// loopCount says how many loops serve, in the singular for one.
func loopCount(n int) string {
	if n == 1 {
		return "1 loop"
	}
	return fmt.Sprintf("%d loops", n)
}
