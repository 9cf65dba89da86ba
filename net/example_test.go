//go:build unix

package net_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/veloq/veloq/executor"
	vnet "github.com/veloq/veloq/net"
)

// A loop runs posted closures and timers on its own thread.
func ExampleLoop_Post() {
	l, err := vnet.NewLoop(0, vnet.Config{Backend: vnet.BackendEpoll})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	done := make(chan string)
	l.Post(func() {
		l.AfterFunc(10*time.Millisecond, func() { done <- "timer fired on the loop" })
	})
	fmt.Println(<-done)
	// Output: timer fired on the loop
}

// Offload moves a request's work off the loop. The handler below goes on
// parsing after it offloaded a request, as a pipelining handler does;
// Offload hides the rest of the input until the offloaded answer is
// written, so the answers come back in the order of the requests.
func ExampleOffload() {
	pool := executor.NewPool(executor.WithWorkers(2))
	defer pool.Shutdown(context.Background())

	h := &vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
		for {
			in, _ := c.Peek(-1)
			i := bytes.IndexByte(in, '\n')
			if i < 0 {
				return // wait for a whole line
			}
			line := string(in[:i+1])
			c.Discard(i + 1)
			if line != "hash\n" {
				c.WriteString("echo " + line) // cheap: answered on the loop
				continue
			}
			vnet.Offload(context.Background(), pool, c, func(context.Context) (string, error) {
				sum := sha256.Sum256(bytes.Repeat([]byte("veloq"), 1<<16)) // CPU-heavy: off the loop
				return fmt.Sprintf("hash %x\n", sum[:4]), nil
			}, func(c *vnet.Conn, answer string, err error) {
				if err != nil {
					return // closed meanwhile
				}
				c.WriteString(answer) // back on the loop, before the next answer
			})
		}
	}}
	s, err := vnet.Listen("tcp", "127.0.0.1:0", h, vnet.WithLoops(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	conn, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	conn.Write([]byte("hash\nping\n")) // two pipelined requests in one segment
	r := bufio.NewReader(conn)
	for range 2 {
		line, _ := r.ReadString('\n')
		fmt.Print(line)
	}
	// Output:
	// hash eff4fd1f
	// echo ping
}

// AvailableBuffer lets a handler build a message in the output queue
// itself: a length-prefixed frame here, assembled where it will be sent,
// so Write queues it without copying it.
func ExampleConn_AvailableBuffer() {
	h := &vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
		in, _ := c.Next(-1)
		buf := c.AvailableBuffer()
		buf = append(buf, byte(len(in))) // a one-byte length, then the bytes
		buf = append(buf, in...)
		c.Write(buf)
	}}
	s, err := vnet.Listen("tcp", "127.0.0.1:0", h, vnet.WithLoops(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	conn, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	conn.Write([]byte("veloq"))
	frame := make([]byte, 6)
	if _, err := io.ReadFull(conn, frame); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d %s\n", frame[0], frame[1:])
	// Output: 5 veloq
}

// Server.ListenAndServe is the one-call form that keeps the Server: it
// runs on its own goroutine while the caller reads Stats, and returns
// once the context ends and the server has shut down.
func ExampleServer_ListenAndServe() {
	dir, err := os.MkdirTemp("", "veloq-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "echo.sock")

	s, err := vnet.NewServer(&vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
		b, _ := c.Next(-1)
		c.Write(b)
	}}, vnet.WithLoops(1))
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background()) // signal.NotifyContext(ctx, os.Interrupt) in main
	served := make(chan error, 1)
	go func() { served <- s.ListenAndServe(ctx, "unix", path, 5*time.Second) }()
	for s.Addr() == nil { // until it listens
		time.Sleep(time.Millisecond)
	}

	c, err := net.Dial("unix", path)
	if err != nil {
		panic(err)
	}
	c.Write([]byte("ping"))
	reply := make([]byte, 4)
	io.ReadFull(c, reply)
	c.Close()
	fmt.Println("echo:", string(reply))
	accepted := uint64(0)
	for _, st := range s.Stats() {
		accepted += st.Accepted
	}
	fmt.Println("accepted:", accepted)

	stop() // Ctrl-C
	fmt.Println("shut down:", <-served)
	_, err = os.Stat(path)
	fmt.Println("socket file removed:", errors.Is(err, fs.ErrNotExist))
	// Output:
	// echo: ping
	// accepted: 1
	// shut down: <nil>
	// socket file removed: true
}
