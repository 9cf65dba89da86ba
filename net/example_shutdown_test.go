//go:build unix

package net_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	vnet "github.com/veloq/veloq/net"
)

// goodbye is a line protocol's handler that ends its connections its own
// way on a graceful shutdown: a last line, then the close.
type goodbye struct{ vnet.HandlerFuncs }

func (goodbye) OnShutdown(c *vnet.Conn) {
	c.WriteString("server going away, reconnect\n")
	c.Close()
}

// Shutdown drains: it stops accepting, calls OnShutdown on each open
// connection, waits until they close or its context's deadline (the drain
// timeout) cuts them, and counts which were drained and which cut. A hot
// upgrade or a SIGTERM handler calls it the same way.
func ExampleShutdownHandler() {
	echo := goodbye{vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
		b, _ := c.Next(-1)
		c.Write(b)
	}}}
	s, err := vnet.Listen("tcp", "127.0.0.1:0", &echo, vnet.WithLoops(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	c.Write([]byte("hi\n"))
	io.ReadFull(c, make([]byte, 3)) // the echo: the connection is served

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fmt.Println("shutdown:", s.Shutdown(ctx))
	last, _ := io.ReadAll(c)
	fmt.Print(string(last))
	st := s.Stats()[0]
	fmt.Println("drained:", st.Drained, "cut:", st.Cut)
	// Output:
	// shutdown: <nil>
	// server going away, reconnect
	// drained: 1 cut: 0
}
