// Command tcp-proxy forwards TCP connections to a set of backends on
// veloq's reactor loops (see package proxy for how).
//
//	go run ./examples/tcp-proxy -listen 127.0.0.1:8000 -backends 127.0.0.1:9000,127.0.0.1:9001
//	go run ./examples/tcp-proxy -listen 127.0.0.1:8000 -backends 127.0.0.1:9000 -loops 1 -backend uring -splice large
//
// It can terminate TLS, serving clients with a certificate and forwarding
// plaintext to the backends:
//
//	go run ./examples/tcp-proxy -listen 127.0.0.1:8443 -backends 127.0.0.1:9000 -tls-cert cert.pem -tls-key key.pem
//
// or pass TLS through, choosing the backend by the server name of the
// client's ClientHello (SNI) without decrypting anything; -sni is
// repeatable, takes exact names and one-label wildcards, and -backends is
// then the route for every other name (without it, such clients are
// closed):
//
//	go run ./examples/tcp-proxy -listen 127.0.0.1:8443 \
//		-sni api.example.com=10.0.0.1:443,10.0.0.2:443 -sni '*.example.com=10.0.0.3:443' \
//		-backends 10.0.0.9:443
//
// It prints one line when it starts and its counters when it stops on
// SIGINT or SIGTERM.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/veloq/veloq/examples/tcp-proxy/proxy"
	vnet "github.com/veloq/veloq/net"
)

const usage = `usage: tcp-proxy -backends HOST:PORT[,HOST:PORT...] [flags]
       tcp-proxy -tls-cert FILE -tls-key FILE -backends ... [flags]     (TLS termination)
       tcp-proxy -sni NAME=HOST:PORT[,...] [-sni ...] [-backends ...] [flags]  (TLS passthrough by SNI)

flags:
`

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tcp-proxy:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	// Handle signals before announcing, so a SIGTERM right after the start
	// line still stops the proxy cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	in, err := start(args, os.Stdout, os.Stderr)
	if err != nil {
		return err
	}
	<-ctx.Done()
	return in.stop(os.Stdout)
}

// config is what the flags ask for.
type config struct {
	listen, backends, backend, splice string
	loops, recvBuf, recvBufs          int
	pin, verbose                      bool
	dialTimeout, cooldown, batchWait  time.Duration
	tlsCert, tlsKey                   string
	routes                            routeFlag
	helloTimeout                      time.Duration
	cpuProfile                        string
}

// routeFlag collects the repeatable -sni flag.
type routeFlag []proxy.Route

func (r *routeFlag) String() string {
	var s []string
	for _, x := range *r {
		s = append(s, x.String())
	}
	return strings.Join(s, " ")
}

func (r *routeFlag) Set(s string) error {
	x, err := proxy.ParseRoute(s)
	if err != nil {
		return err
	}
	*r = append(*r, x)
	return nil
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	var c config
	fs := flag.NewFlagSet("tcp-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8000", "address to accept clients on")
	fs.StringVar(&c.backends, "backends", "", "comma-separated backend addresses (host:port), used round-robin; with -sni, the route for names no -sni matches and hellos without a name (none: such clients are closed)")
	fs.IntVar(&c.loops, "loops", runtime.NumCPU(), "number of reactor loops")
	fs.StringVar(&c.backend, "backend", "auto", "I/O backend: auto, uring, epoll or portable")
	fs.BoolVar(&c.pin, "pin", false, "pin each loop to its own CPU")
	fs.DurationVar(&c.dialTimeout, "dial-timeout", 5*time.Second, "timeout for each backend connect")
	fs.DurationVar(&c.cooldown, "cooldown", 2*time.Second, "how long a backend whose connect failed is skipped")
	fs.StringVar(&c.splice, "splice", "off", "zero-copy forwarding with splice(2): off, large (a direction switches after a large read) or always; TLS-terminated clients are always copied")
	fs.IntVar(&c.recvBuf, "recv-buffer", 64<<10, "io_uring receive buffer size (bytes; -recv-buffers of them per loop): larger ones mean fewer completions per large message")
	// 64 buffers (4 MiB a loop) by default: with 128, 64 pairs relaying
	// 64 KiB messages no longer ran the ring dry (ENOBUFS receives, 0.1-0.3
	// per request) and ForwardTo copied 0.2% of the bytes instead of 8-18%,
	// but the ring's 4 MiB more a loop showed in the proxy's RSS under
	// slow readers: 16 clients x 8 MiB through 2 loops grew it by 20 MiB
	// against a 16 MiB budget. -recv-buffers 128 trades that memory for
	// the bulk throughput.
	fs.IntVar(&c.recvBufs, "recv-buffers", 64, "io_uring receive buffers per loop (a power of two, 8 to 4096); each loop's ring takes -recv-buffers x -recv-buffer bytes")
	fs.DurationVar(&c.batchWait, "batch-wait", 0, "how long a busy loop may hold a wake-up back to take events in a batch (0: the default, 20µs; negative: off)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "terminate TLS: serve clients with this certificate chain (PEM file, with -tls-key) and forward plaintext to the backends; these clients are copied, never spliced, whatever -splice says")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the private key of -tls-cert (PEM file)")
	fs.Var(&c.routes, "sni", "pass TLS through without terminating it, routed by the ClientHello's server name: NAME=HOST:PORT[,HOST:PORT...], NAME exact (any case) or *.DOMAIN for one label under DOMAIN; repeatable; clients that send no TLS ClientHello are closed")
	fs.DurationVar(&c.helloTimeout, "hello-timeout", 5*time.Second, "with -sni, how long a client has to send its complete ClientHello")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the run, from the start to SIGTERM, to this file")
	fs.BoolVar(&c.verbose, "v", false, "log at debug level")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return &c, nil
}

// check refuses flag combinations that cannot work.
func (c *config) check() error {
	sni := len(c.routes) > 0
	switch {
	case c.backends == "" && !sni:
		return errors.New("-backends is required (host:port[,host:port...]), or -sni routes")
	case (c.tlsCert == "") != (c.tlsKey == ""):
		return errors.New("-tls-cert and -tls-key go together")
	case c.tlsCert != "" && sni:
		return errors.New("-sni passes TLS through and -tls-cert terminates it: use one of them")
	case c.recvBuf < 4096 || c.recvBuf > 1<<20:
		return fmt.Errorf("-recv-buffer %d: want 4 KiB to 1 MiB", c.recvBuf)
	case c.recvBufs < 8 || c.recvBufs > 4096 || c.recvBufs&(c.recvBufs-1) != 0:
		return fmt.Errorf("-recv-buffers %d: want a power of two from 8 to 4096", c.recvBufs)
	}
	return nil
}

// instance is a running proxy.
type instance struct {
	p       *proxy.Proxy
	s       *vnet.Server
	profile *os.File // -cpuprofile's file while the profile runs
}

// start listens as the flags say and prints the start line on stdout.
func start(args []string, stdout, stderr io.Writer) (*instance, error) {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return nil, err
	}
	level := slog.LevelInfo
	if c.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	p, mode, err := newProxy(c, logger)
	if err != nil {
		return nil, err
	}
	opts, err := listenOptions(c, logger)
	if err != nil {
		return nil, err
	}
	s, err := vnet.Listen("tcp", c.listen, p, opts...)
	if err != nil {
		return nil, err
	}
	in := &instance{p: p, s: s}
	if c.cpuProfile != "" {
		if in.profile, err = startProfile(c.cpuProfile); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	fmt.Fprintf(stdout, "tcp-proxy: listening on %s, backends %s, backend %s, %d loops, splice %s%s, pid %d\n",
		s.Addr(), orNone(strings.Join(p.Backends(), ",")), s.Backend(), c.loops, mode, tlsMode(c, p), os.Getpid())
	return in, nil
}

// startProfile starts a CPU profile written to path.
func startProfile(path string) (*os.File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return f, nil
}

func newProxy(c *config, logger *slog.Logger) (*proxy.Proxy, proxy.SpliceMode, error) {
	mode, err := proxy.ParseSpliceMode(c.splice)
	if err != nil {
		return nil, 0, err
	}
	opts := []proxy.Option{proxy.WithDialTimeout(c.dialTimeout), proxy.WithCooldown(c.cooldown),
		proxy.WithSplice(mode), proxy.WithLogger(logger)}
	if len(c.routes) > 0 {
		opts = append(opts, proxy.WithSNI(c.routes...), proxy.WithHelloTimeout(c.helloTimeout))
	}
	var backends []string
	if c.backends != "" {
		backends = strings.Split(c.backends, ",")
	}
	p, err := proxy.New(backends, opts...)
	return p, mode, err
}

func listenOptions(c *config, logger *slog.Logger) ([]vnet.Option, error) {
	b, err := vnet.ParseBackend(c.backend)
	if err != nil {
		return nil, err
	}
	opts := []vnet.Option{vnet.WithBackend(b), vnet.WithLogger(logger),
		vnet.WithLoopConfig(vnet.Config{RecvBufferSize: c.recvBuf, RecvBuffers: c.recvBufs}),
		vnet.WithLoops(c.loops), vnet.WithPin(c.pin), vnet.WithBatchWait(c.batchWait)}
	if c.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert, -tls-key: %w", err)
		}
		// crypto/tls's defaults (TLS 1.2 and up, its cipher suites) suit a
		// proxy that does not know what its clients speak: no ALPN.
		opts = append(opts, vnet.WithTLS(&tls.Config{Certificates: []tls.Certificate{cert}}))
	}
	return opts, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// tlsMode describes the TLS handling for the start line.
func tlsMode(c *config, p *proxy.Proxy) string {
	switch {
	case c.tlsCert != "":
		return ", tls terminated"
	case len(c.routes) > 0:
		var r []string
		for _, x := range p.Routes() {
			r = append(r, x.String())
		}
		return ", sni passthrough " + strings.Join(r, " ")
	}
	return ""
}

// stop prints the counters and shuts the server down.
func (in *instance) stop(stdout io.Writer) error {
	st := in.p.Stats()
	fmt.Fprintf(stdout, "tcp-proxy: stopping: %d accepted, %d active, %d connected, %d dial failures, %d without backend, %d bytes up, %d bytes down, peak queue %d bytes",
		st.Accepted, st.Active, st.Connected, st.DialFailures, st.NoBackend, st.BytesUp, st.BytesDown, st.PeakQueued)
	if st.Routed+st.NotTLS+st.BadHello+st.HelloTimeouts+st.NoRoute > 0 {
		fmt.Fprintf(stdout, ", %d routed by SNI, %d not TLS, %d bad hellos, %d hello timeouts, %d without route",
			st.Routed, st.NotTLS, st.BadHello, st.HelloTimeouts, st.NoRoute)
	}
	var out, inPlace uint64
	for _, ls := range in.s.Stats() {
		out += ls.BytesOut
		inPlace += ls.InPlace
	}
	fmt.Fprintf(stdout, ", %d bytes sent of which %d from receive buffers in place", out, inPlace)
	fmt.Fprintln(stdout)
	if in.profile != nil {
		pprof.StopCPUProfile()
		if err := in.profile.Close(); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := in.s.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
