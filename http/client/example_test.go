package client_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/veloq/veloq/http/client"
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
