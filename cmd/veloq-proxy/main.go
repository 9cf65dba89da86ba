// Command veloq-proxy is an HTTP reverse proxy on veloq's loops: it
// serves HTTP/1.1 and HTTP/2 (h2 over TLS, h2c) and forwards every
// request to one of its upstreams over pooled keep-alive HTTP/1.1 or
// HTTP/2 connections, one pool per loop.
//
//	go run ./cmd/echo-server -mode http -addr 127.0.0.1:9001 &
//	go run ./cmd/veloq-proxy -listen 127.0.0.1:8080 -upstream 127.0.0.1:9001
//
// -upstream repeats (host:port, http://host:port, https://host:port,
// h2c://host:port or h2://host:port);
// -policy is round-robin, least-outstanding, peak-ewma or hash (with
// -hash-header, -hash-cookie or -hash-path); -health-path turns on active
// health checks; -cert and -key serve TLS. It prints where it listens
// when it starts, stops cleanly on SIGINT or SIGTERM, and then prints
// its per-upstream counters and its client's pool statistics.
//
// On SIGUSR2 (nginx's signal for a binary upgrade) it restarts without
// dropping a connection: it starts the program anew (the binary now at
// its path, with the same flags) with its listening sockets (package
// upgrade), and once the new process serves, stops accepting, finishes
// the requests in flight and exits; if the new process fails, the old
// one says why on stderr and serves on.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/http/client"
	"github.com/veloq/veloq/http/proxy"
	"github.com/veloq/veloq/internal/profile"
	vnet "github.com/veloq/veloq/net"
	"github.com/veloq/veloq/upgrade"
)

// signalsHelp ends -help.
const signalsHelp = `
Signals:
  SIGINT, SIGTERM  stop accepting, finish the requests in flight (10 s at most), exit
  SIGUSR2          zero-downtime restart (as nginx's binary upgrade): start the
                   program at this path anew with the listening sockets, and once
                   it serves, stop as on SIGTERM; if it fails, serve on`

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "veloq-proxy:", err)
		os.Exit(1)
	}
}

// proxyRecvBuffer is the io_uring receive buffer size the proxy's loops
// use by default, 64 KiB where the loop's default is 16 KiB, as the C
// floor's (bench/floor/uring_proxy.c) per-connection buffer. A 16 KiB
// answer with its head (16.6 KiB) took two receives and two sends to the
// client, and a 1 MiB one 65 of each, where epoll reads 64 KiB at a
// time; with 64 KiB buffers, 2 and 19 (counted in the backend,
// cmd/veloq-proxy -backend uring under wrk -c64 to nginx). 128 of them
// make a ring of 8 MiB per loop, twice the default's, which ran dry
// (ENOBUFS) in none of those runs.
const proxyRecvBuffer = 64 << 10

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func run(args []string) error {
	fs := flag.NewFlagSet("veloq-proxy", flag.ContinueOnError)
	var upstreams listFlag
	listen := fs.String("listen", "127.0.0.1:8080", "listen address")
	fs.Var(&upstreams, "upstream", "upstream host:port, http://host:port, https://host:port, h2c://host:port or h2://host:port (repeatable)")
	policy := fs.String("policy", "round-robin", "round-robin, least-outstanding, peak-ewma or hash")
	hashHeader := fs.String("hash-header", "", "hash policy: hash this request field")
	hashCookie := fs.String("hash-cookie", "", "hash policy: hash this cookie")
	hashPath := fs.Bool("hash-path", false, "hash policy: hash the path")
	healthPath := fs.String("health-path", "", "active health checks: GET this path on every upstream")
	healthInterval := fs.Duration("health-interval", 5*time.Second, "time between health checks")
	timeout := fs.Duration("timeout", 60*time.Second, "per-attempt upstream timeout (504 past it)")
	loops := fs.Int("loops", runtime.NumCPU(), "number of reactor loops")
	backend := fs.String("backend", "auto", "I/O backend: auto, uring, epoll or portable")
	cert := fs.String("cert", "", "TLS certificate file (PEM); with -key, serve HTTPS and h2")
	key := fs.String("key", "", "TLS key file (PEM)")
	via := fs.String("via", "", "add Via with this pseudonym both ways")
	forwarded := fs.Bool("forwarded", false, "add an RFC 7239 Forwarded element")
	host := fs.String("host", "", "send this Host upstream instead of the client's")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	recvBuf := fs.Int("recv-buffer", proxyRecvBuffer, "io_uring: bytes per receive buffer, 128 per loop (0: the loop's default, 256 of 16 KiB)")
	maxBody := fs.Int64("max-body", 0, "largest request body forwarded, in bytes (0: no limit); bodies stream, never buffered whole")
	memprofile := fs.String("memprofile", "", "when asked to stop, write a heap profile to this file (after a GC, before any connection closes: what the open connections hold)")
	memprofilerate := fs.Int("memprofilerate", 0, "with -memprofile, sample an allocation every this many bytes on average (runtime.MemProfileRate; 0: Go's default, 512 KiB; 1: every one)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage of veloq-proxy:")
		fs.PrintDefaults()
		fmt.Fprintln(fs.Output(), signalsHelp)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(upstreams) == 0 {
		return errors.New("at least one -upstream is needed")
	}
	pol, ok := proxy.ParsePolicy(*policy)
	if !ok {
		return fmt.Errorf("-policy %q: want round-robin, least-outstanding, peak-ewma or hash", *policy)
	}
	opts := []proxy.Option{
		proxy.WithUpstreams(upstreams...), proxy.WithPolicy(pol), proxy.WithTimeout(*timeout),
		proxy.WithVia(*via), proxy.WithForwarded(*forwarded), proxy.WithHost(*host),
	}
	if pol == proxy.Hash {
		switch {
		case *hashHeader != "":
			opts = append(opts, proxy.WithHashKey(proxy.HeaderKey(*hashHeader)))
		case *hashCookie != "":
			opts = append(opts, proxy.WithHashKey(proxy.CookieKey(*hashCookie)))
		case *hashPath:
			opts = append(opts, proxy.WithHashKey(proxy.PathKey()))
		default:
			return errors.New("-policy hash needs -hash-header, -hash-cookie or -hash-path")
		}
	}
	if *healthPath != "" {
		opts = append(opts, proxy.WithHealthCheck(proxy.HealthCheck{Path: *healthPath, Interval: *healthInterval}))
	}
	nopts := []vnet.Option{vnet.WithLoops(*loops)}
	if *recvBuf > 0 {
		nopts = append(nopts, vnet.WithLoopConfig(vnet.Config{RecvBuffers: 128, RecvBufferSize: *recvBuf}))
	}
	if *backend != "auto" {
		nopts = append(nopts, vnet.WithBackend(vnet.Backend(*backend)))
		// The proxy forwards on the server's loops; its client's one own
		// loop must use the same backend, or -backend epoll would still
		// probe io_uring (which hangs under valgrind, for one).
		cl, err := client.New(client.WithNumLoops(1), client.WithBackend(vnet.Backend(*backend)))
		if err != nil {
			return err
		}
		defer cl.Close()
		opts = append(opts, proxy.WithClient(cl))
	}
	p, err := proxy.New(opts...)
	if err != nil {
		return err
	}
	sopts := []vhttp.Option{vhttp.WithNetOptions(nopts...)}
	if *cert != "" || *key != "" {
		if *cert == "" || *key == "" {
			return errors.New("-cert and -key go together")
		}
		pair, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			return err
		}
		sopts = append(sopts, vhttp.WithTLS(&tls.Config{Certificates: []tls.Certificate{pair}}))
	}
	if *memprofile != "" && *memprofilerate > 0 {
		runtime.MemProfileRate = *memprofilerate // before the first allocation it should see
	}
	stopProfile, err := profile.StartCPU(*cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs0 := ms.Mallocs
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	upg, err := upgrade.New()
	if err != nil {
		return err
	}
	// Request bodies stream to the upstream as they arrive, with
	// backpressure both ways, whatever their size.
	s, err := vhttp.NewServer(vhttp.StreamBody(p, *maxBody), sopts...)
	if err != nil {
		return err
	}
	if _, err := upg.Listen(s, "tcp", *listen); err != nil {
		return errors.Join(err, s.Close())
	}
	if err := upg.Ready(); err != nil {
		return errors.Join(err, s.Close())
	}
	fmt.Printf("veloq-proxy: on %s, backend %s, %d loops, %d upstreams (%s), pid %d\n",
		s.Addr(), s.NetServer().Backend(), len(s.NetServer().Loops()), len(upstreams), pol, os.Getpid())
	// Done also once an upgrade on SIGUSR2 succeeded: shut down as on
	// SIGTERM then.
	ctx = upg.UpgradeOn(ctx, func(err error) {
		fmt.Fprintln(os.Stderr, "veloq-proxy: upgrade failed, serving on:", err)
	}, upgradeSignals...)
	if *memprofile != "" {
		ctx = profile.HeapAtStop(ctx, *memprofile, "veloq-proxy", os.Stderr)
	}
	<-ctx.Done()
	fmt.Println("veloq-proxy: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = s.Shutdown(sctx)
	p.Close()
	printStats(p)
	runtime.ReadMemStats(&ms)
	if n := p.Stats().Client.Requests; n > 0 {
		fmt.Printf("veloq-proxy: %.2f heap allocations per request (whole process, over the run)\n", float64(ms.Mallocs-mallocs0)/float64(n))
	}
	return err
}

func printStats(p *proxy.Proxy) {
	st := p.Stats()
	for _, u := range st.Upstreams {
		fmt.Printf("veloq-proxy: upstream %s %s: %d requests, %d retries, %d connect errors, %d resets, %d timeouts, %d bad answers, %d 5xx, %d ejections, %d canceled (client left)\n",
			u.Addr, u.State, u.Requests, u.Retries, u.ConnectErrors, u.ResetErrors, u.Timeouts, u.BadResponses, u.Status5xx, u.Ejections, u.Canceled)
	}
	c := st.Client
	reuse := 0.0
	if sent := c.NewConns + c.ReusedConns; sent > 0 {
		reuse = float64(c.ReusedConns) / float64(sent)
	}
	fmt.Printf("veloq-proxy: client: %d requests, %d new upstream connections, %d on reused ones (reuse %.4f), %d retries, %d errors, %d canceled (%d of their connections kept)\n",
		c.Requests, c.NewConns, c.ReusedConns, reuse, c.Retries, c.Errors, c.Canceled, c.Drained)
	if st.Upgrades > 0 {
		fmt.Printf("veloq-proxy: %d upgrades (WebSocket and other tunnels), %d open at exit\n", st.Upgrades, st.Tunnels)
	}
}
