package http_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"time"

	vhttp "github.com/veloq/veloq/http"
	vnet "github.com/veloq/veloq/net"
)

// This is what a connection's read callback does: parse every complete
// request in the accumulated input, answer it, and keep the rest for the
// next read.
func Example() {
	in := []byte("GET /hello?name=veloq HTTP/1.1\r\nHost: example.com\r\n\r\n" +
		"POST /echo HTTP/1.1\r\nHost: example.com\r\nContent-Length: 4\r\n\r\nping" +
		"GET /partial HTTP/1.1\r\nHo")

	var (
		p     vhttp.Parser
		req   vhttp.Request
		resp  vhttp.Response
		dates vhttp.DateCache
		out   []byte
		body  = make([]byte, 0, 512)
		now   = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	)
	for {
		n, err := p.Parse(in, &req)
		if errors.Is(err, vhttp.ErrNeedMore) {
			break // wait for the next read; keep in
		}
		if err != nil {
			out = vhttp.AppendError(out, vhttp.ErrorStatus(err), dates.Bytes(now))
			break // then close the connection
		}
		in = in[n:]
		reqBody := in[:max(req.ContentLength, 0)]
		in = in[len(reqBody):]

		resp.Reset(body)
		resp.Header().Set("Content-Type", "text/plain")
		switch string(req.Path) {
		case "/hello":
			fmt.Fprintf(&resp, "hello, %s", req.Query[len("name="):])
		case "/echo":
			resp.Write(reqBody)
		default:
			resp.SetStatus(vhttp.StatusNotFound)
		}
		out = resp.AppendTo(out, &req, dates.Bytes(now))
		if resp.ShouldClose() {
			break
		}
	}
	// Show the CRLF line ends as plain newlines.
	fmt.Printf("%s\n---\nleft for the next read: %q\n", bytes.ReplaceAll(out, []byte("\r\n"), []byte("\n")), in)
	// Output:
	// HTTP/1.1 200 OK
	// Date: Thu, 02 Jan 2025 03:04:05 GMT
	// Server: veloq
	// Content-Type: text/plain
	// Content-Length: 12
	//
	// hello, veloqHTTP/1.1 200 OK
	// Date: Thu, 02 Jan 2025 03:04:05 GMT
	// Server: veloq
	// Content-Type: text/plain
	// Content-Length: 4
	//
	// ping
	// ---
	// left for the next read: "GET /partial HTTP/1.1\r\nHo"
}

func ExampleChunkedDecoder() {
	in := []byte("5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nChecksum: 42\r\n\r\n")
	var d vhttp.ChunkedDecoder
	for {
		n, data, done, err := d.Next(in)
		if len(data) > 0 {
			fmt.Printf("%q\n", data)
		}
		if done {
			f, _, _ := vhttp.NextField(d.Trailer(in))
			fmt.Printf("trailer %s=%s\n", f.Name, f.Value)
			break
		}
		if err != nil {
			fmt.Println(err)
			break
		}
		in = in[n:]
	}
	// Output:
	// "hello"
	// ", world"
	// trailer Checksum=42
}

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
