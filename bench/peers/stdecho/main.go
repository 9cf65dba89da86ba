// Command stdecho is the baseline peer: a TCP echo server on the Go standard
// library, one goroutine per connection, each echoing through its own 64 KiB
// buffer. It prints "stdecho: tcp echo on ADDR, pid N" once listening and
// exits on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9001", "listen address")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stdecho:", err)
		os.Exit(1)
	}
	fmt.Printf("stdecho: tcp echo on %s, GOMAXPROCS %d, pid %d\n", ln.Addr(), runtime.GOMAXPROCS(0), os.Getpid())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	go func() {
		<-ctx.Done()
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				break
			}
			fmt.Fprintln(os.Stderr, "stdecho: accept:", err)
			continue
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			echo(c)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			c.Close()
		})
	}
	wg.Wait()
	fmt.Println("stdecho: shut down")
}

func echo(c net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
