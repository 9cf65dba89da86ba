package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	nethttp "net/http"
	"os"
	"strconv"
	"time"

	vhttp "github.com/veloq/veloq/http"
	vnet "github.com/veloq/veloq/net"
	"github.com/veloq/veloq/upgrade"
	"github.com/veloq/veloq/websocket"
)

// httpConfig carries the flags HTTP mode uses.
type httpConfig struct {
	addr, network string
	loops         int
	backend       vnet.Backend
	pin           bool
	batchWait     time.Duration
	logger        *slog.Logger
	ws            bool // -mode ws: upgrade requests become WebSocket echoes
	wsCompress    bool // with ws, negotiate permessage-deflate
	// std serves the net/http handler stdHTTPHandler through FromStd
	// instead of the fast handler.
	std bool
	tls *tls.Config // nil: plaintext
	upg *upgrade.Upgrader
	// tlsOffLoop runs handshakes on goroutines (-tls-handshake-off-loop).
	tlsOffLoop bool
	// static, when set, is a directory served by vhttp.FileServer in
	// place of the hello and echo handler.
	static string
}

// helloBody is what GET / answers.
const helloBody = "Hello, World!"

// httpHandler answers GET / with a greeting and POST /echo with the
// request body; everything else is 404. It runs inline on the loop and
// allocates nothing.
func httpHandler(w *vhttp.ResponseWriter, r *vhttp.Request) {
	switch string(r.Path) {
	case "/":
		if string(r.Method) != "GET" && string(r.Method) != "HEAD" {
			w.Header().Set("Allow", "GET, HEAD")
			w.WriteHeader(vhttp.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteString(helloBody)
	case "/echo":
		if string(r.Method) != "POST" {
			w.Header().Set("Allow", "POST")
			w.WriteHeader(vhttp.StatusMethodNotAllowed)
			return
		}
		var n [20]byte
		h := w.Header()
		h.SetBytes([]byte("X-Method"), r.Method)
		h.SetBytes([]byte("X-Path"), r.Path)
		h.SetBytes([]byte("X-Body-Len"), strconv.AppendInt(n[:0], int64(len(r.Body)), 10))
		if ct := r.Header("Content-Type"); ct != nil {
			h.SetBytes([]byte("Content-Type"), ct)
		}
		w.Write(r.Body)
	default:
		w.WriteHeader(vhttp.StatusNotFound)
	}
}

// stdHTTPHandler is the net/http handler of -mode http-std: the same
// answers as httpHandler (and as bench/peers/stdhttp for GET /), written
// against net/http and served through FromStd, to measure the adapter.
func stdHTTPHandler() nethttp.Handler {
	hello := []byte(helloBody)
	mux := nethttp.NewServeMux()
	mux.HandleFunc("GET /", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.URL.Path != "/" {
			nethttp.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write(hello)
	})
	mux.HandleFunc("POST /echo", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		h := w.Header()
		h.Set("X-Method", r.Method)
		h.Set("X-Path", r.URL.Path)
		if ct := r.Header.Get("Content-Type"); ct != "" {
			h.Set("Content-Type", ct)
		}
		io.Copy(w, r.Body)
	})
	return mux
}

// runHTTP serves HTTP mode until ctx is done (SIGINT or SIGTERM; main
// installs the handling before the start line is printed).
func runHTTP(ctx context.Context, cfg httpConfig) error {
	var h vhttp.Handler = vhttp.HandlerFunc(httpHandler)
	desc := "http"
	switch {
	case cfg.ws:
		h = wsHandler(websocket.NewUpgrader(websocket.WithCompression(cfg.wsCompress, 0), websocket.WithLogger(cfg.logger)))
		desc = "websocket echo (and http)"
		if cfg.wsCompress {
			desc = "websocket echo with permessage-deflate (and http)"
		}
	case cfg.std:
		h = vhttp.FromStd(stdHTTPHandler())
		desc = "http (net/http handler via FromStd)"
	case cfg.static != "":
		if fi, err := os.Stat(cfg.static); err != nil || !fi.IsDir() {
			return fmt.Errorf("-static %s: not a directory (%v)", cfg.static, err)
		}
		h = vhttp.FileServer(cfg.static)
		desc = "http static files from " + cfg.static
	}
	opts := []vhttp.Option{vhttp.WithNetOptions(vnet.WithLoops(cfg.loops)), vhttp.WithNetOptions(vnet.WithBackend(cfg.backend)), vhttp.WithLogger(cfg.logger),
		vhttp.WithNetOptions(vnet.WithPin(cfg.pin), vnet.WithBatchWait(cfg.batchWait))}
	if cfg.tls != nil {
		opts = append(opts, vhttp.WithTLS(cfg.tls))
		if cfg.tlsOffLoop {
			opts = append(opts, vhttp.WithNetOptions(vnet.WithTLSHandshakeOffLoop(true)))
		}
		desc += " over TLS"
	}
	s, err := vhttp.NewServer(h, opts...)
	if err != nil {
		return err
	}
	if _, err := cfg.upg.Listen(s, cfg.network, cfg.addr); err != nil {
		return errors.Join(err, s.Close())
	}
	if err := cfg.upg.Ready(); err != nil {
		return errors.Join(err, s.Close())
	}
	fmt.Printf("echo-server: %s on %s, backend %s, %s, pid %d\n",
		desc, s.Addr(), s.NetServer().Backend(), loopCount(len(s.NetServer().Loops())), os.Getpid())

	<-ctx.Done()
	fmt.Println("echo-server: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Shutdown(sctx)
}
