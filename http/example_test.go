package http_test

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	vhttp "github.com/veloq/veloq/http"
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
