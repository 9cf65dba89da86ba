package client_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/veloq/veloq/http/client"
	vnet "github.com/veloq/veloq/net"
)

// A request from a goroutine, with Do, to a local upstream.
func Example() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	}))
	defer ln.Close()

	c, err := client.New(client.WithNumLoops(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	resp, err := c.Do(context.Background(), &client.Request{
		Method: "GET", Addr: ln.Addr().String(), Target: "/greeting",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, string(body))
	// Output: 200 hello from /greeting
}

// printer is a ResponseHandler: it runs on the loop the call was sent
// from, and copies nothing it does not keep.
type printer struct{ done chan struct{} }

func (p *printer) OnResponseHead(call *client.Call, h *client.ResponseHead) {
	fmt.Println("status", h.Status)
}

func (p *printer) OnResponseBody(call *client.Call, b []byte) { fmt.Printf("body %q\n", b) }

func (p *printer) OnResponseEnd(call *client.Call, trailer []client.Field, err error) {
	fmt.Println("end", err)
	close(p.done)
}

// A request sent on a loop, as a handler or a loop callback would: the
// response arrives by callbacks on the same loop.
func ExampleClient_Send() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hi")
	}))
	defer ln.Close()

	l, err := vnet.NewLoop(0, vnet.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	c, _ := client.New(client.WithLoops([]*vnet.Loop{l}))
	defer c.Close()

	p := &printer{done: make(chan struct{})}
	l.Post(func() {
		c.Send(l, &client.Request{Method: "GET", Addr: ln.Addr().String(), Target: "/"}, p)
	})
	<-p.done
	// Output:
	// status 200
	// body "hi"
	// end <nil>
}
