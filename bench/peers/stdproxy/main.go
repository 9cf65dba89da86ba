// Command stdproxy is the net/http peer for the HTTP reverse-proxy
// benchmark (bench/httpproxy.sh): httputil.ReverseProxy on net/http,
// forwarding to one upstream with a keep-alive pool sized like the other
// proxies' (64 idle connections), as a user of the standard library
// would write it. Run it with GOMAXPROCS=1 to compare per CPU.
//
// On SIGTERM it prints how many upstream connections it opened and how
// many requests it forwarded, so the benchmark can report connection
// reuse.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	upstream := flag.String("upstream", "http://127.0.0.1:9000", "upstream URL")
	flag.Parse()
	u, err := url.Parse(*upstream)
	if err != nil {
		log.Fatal(err)
	}
	var dials, requests atomic.Int64
	d := &net.Dialer{Timeout: 5 * time.Second}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, address)
		},
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		rp.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("stdproxy: httputil.ReverseProxy on %s to %s, pid %d\n", ln.Addr(), u, os.Getpid())
	go srv.Serve(ln)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	fmt.Printf("stdproxy: requests %d upstream_conns %d\n", requests.Load(), dials.Load())
}
