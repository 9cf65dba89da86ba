//go:build linux

// Linux only: the example makes its listening socket with socket(2) flags only Linux has.

package net_test

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	vnet "github.com/veloq/veloq/net"
)

// An embedder (a proxy, a tunnel) builds the engine without a Server:
// loops made with NewLoop, a listening socket of its own handed to one
// loop with Loop.AddListener, and an outbound connection that another
// loop dials with Loop.Dial. Here the dialed side sends a line, the
// listening side answers it in upper case, and the answer comes back.
func Example_engine() {
	cfg := vnet.Config{Backend: vnet.BackendEpoll} // or BackendAuto: io_uring where it runs
	server, err := vnet.NewLoop(0, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer server.Close()
	client, err := vnet.NewLoop(1, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	// The embedder's own socket: non-blocking, bound, listening. The loop
	// owns it once AddListener returns.
	fd, err := listenTCP4Loopback()
	if err != nil {
		fmt.Println(err)
		return
	}
	upper := &vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
		in, _ := c.Peek(-1)
		if i := bytes.IndexByte(in, '\n'); i >= 0 {
			line, _ := c.Next(i + 1)
			c.Write(bytes.ToUpper(line))
		}
	}}
	ln, err := server.AddListener(fd, "tcp", upper, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()

	// The client's handler runs on the client loop: it writes once the
	// connect completes and closes after the answer.
	answer := make(chan string, 1)
	ask := &vnet.HandlerFuncs{
		Open: func(c *vnet.Conn) { c.WriteString("hello, engine\n") },
		Data: func(c *vnet.Conn) {
			in, _ := c.Peek(-1)
			if i := bytes.IndexByte(in, '\n'); i >= 0 {
				answer <- string(in[:i])
				c.Close()
			}
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Called from this goroutine (not the loop's), Dial waits for the
	// connection; called on the loop, it would return at once.
	if _, err := client.Dial(ctx, "tcp", ln.Addr().String(), ask); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(<-answer)
	// Output: HELLO, ENGINE
}

// listenTCP4Loopback makes a non-blocking listening TCP socket on
// 127.0.0.1 with a port the kernel picks.
func listenTCP4Loopback() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	sa := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
