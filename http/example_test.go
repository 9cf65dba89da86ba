package http_test

import (
	"context"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"time"

	vhttp "github.com/veloq/veloq/http"
	vnet "github.com/veloq/veloq/net"
)

// Server.ListenAndServe is the one-call form that keeps the Server: it
// runs on its own goroutine while the caller reads Stats, and returns
// once the context ends and the server has shut down.
func ExampleServer_ListenAndServe() {
	h := vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		w.WriteString("Hello, World!")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0") // find a free port for the example
	if err != nil {
		panic(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	s, err := vhttp.NewServer(h, vhttp.WithNetOptions(vnet.WithLoops(1)))
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background()) // signal.NotifyContext(ctx, os.Interrupt) in main
	served := make(chan error, 1)
	go func() { served <- s.ListenAndServe(ctx, "tcp", addr, 5*time.Second) }()
	for s.Addr() == nil { // until it listens
		time.Sleep(time.Millisecond)
	}

	resp, err := nethttp.Get("http://" + addr + "/")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, string(body))
	fmt.Println("accepted:", s.Stats().Accepted)

	stop() // Ctrl-C
	fmt.Println("shut down:", <-served)
	// Output:
	// 200 OK Hello, World!
	// accepted: 1
	// shut down: <nil>
}
