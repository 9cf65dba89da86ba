// Command stdhttp is the net/http peer for HTTP benchmarks: GET / answers
// "Hello, World!" as text/plain and POST /echo echoes the body, like
// echo-server -mode http, with the very handler echo-server -mode
// http-std serves through FromStd.
//
// With -h2c it also serves HTTP/2 with prior knowledge in plaintext; over
// TLS net/http serves HTTP/2 by ALPN anyway.
//
// With -tls-self-signed it serves HTTPS (ListenAndServeTLS) with an ECDSA
// P-256 certificate made at start, as echo-server -tls-self-signed does,
// and otherwise crypto/tls's defaults (session tickets issued, as veloq's
// are). On shutdown it prints how many connections it accepted and how
// many TLS handshakes were full or resumed, so a benchmark can check that
// a "new connection per request" load really made a full handshake per
// request.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/veloq/veloq/bench/internal/selfsigned"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	selfSigned := flag.Bool("tls-self-signed", false, "serve HTTPS with a self-signed ECDSA P-256 certificate made at start (clients must skip verification)")
	h2c := flag.Bool("h2c", false, "in plaintext, also serve HTTP/2 with prior knowledge (http.Server.Protocols)")
	flag.Parse()
	hello := []byte("Hello, World!")
	// The same handler as echo-server -mode http-std (stdHTTPHandler in
	// cmd/echo-server/http_mode.go) serves through FromStd, route for
	// route, so the two compare the servers under one handler.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write(hello)
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Method", r.Method)
		h.Set("X-Path", r.URL.Path)
		if ct := r.Header.Get("Content-Type"); ct != "" {
			h.Set("Content-Type", ct)
		}
		io.Copy(w, r.Body)
	})
	var accepted atomic.Int64
	var hs selfsigned.Handshakes
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				accepted.Add(1)
			}
		}}
	proto := "http"
	if *h2c {
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		srv.Protocols = &p
		proto = "http+h2c"
	}
	if *selfSigned {
		cert, err := selfsigned.New(24 * time.Hour)
		if err != nil {
			log.Fatal(err)
		}
		srv.TLSConfig = hs.Config(cert)
		proto = "https"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	// Listen before saying so: the bench scripts start their load when
	// this line appears (lib.sh's server_ready).
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("stdhttp: %s on %s, pid %d\n", proto, ln.Addr(), os.Getpid())
	if *selfSigned {
		err = srv.ServeTLS(ln, "", "") // the certificate is in TLSConfig
	} else {
		err = srv.Serve(ln)
	}
	if err != http.ErrServerClosed {
		log.Fatal(err)
	}
	<-done
	fmt.Printf("stdhttp: shut down: %d connections accepted, %d full TLS handshakes, %d resumed\n",
		accepted.Load(), hs.Full.Load(), hs.Resumed.Load())
}
