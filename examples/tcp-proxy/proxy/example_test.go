//go:build unix

package proxy_test

import (
	"fmt"
	"io"
	"log"
	"net"

	"github.com/veloq/veloq/examples/tcp-proxy/proxy"
	vnet "github.com/veloq/veloq/net"
)

// A proxy in front of an echo server: the client talks to the proxy and
// gets the backend's answer.
func Example() {
	echo, err := vnet.Listen("tcp", "127.0.0.1:0", &vnet.HandlerFuncs{
		Data: func(c *vnet.Conn) {
			in, _ := c.Next(-1)
			c.Write(in)
		},
		EOF: func(c *vnet.Conn) { c.CloseWrite() },
	}, vnet.WithLoops(1))
	if err != nil {
		log.Fatal(err)
	}
	defer echo.Close()

	p, err := proxy.New([]string{echo.Addr().String()}, proxy.WithSplice(proxy.SpliceLarge))
	if err != nil {
		log.Fatal(err)
	}
	srv, err := vnet.Listen("tcp", "127.0.0.1:0", p, vnet.WithLoops(2))
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hello through the proxy"))
	c.(*net.TCPConn).CloseWrite()
	answer, _ := io.ReadAll(c)
	fmt.Println(string(answer))
	fmt.Println(p.Stats().Connected, "backend connection")
	// Output:
	// hello through the proxy
	// 1 backend connection
}
