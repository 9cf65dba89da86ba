// Command stdudp is the UDP baseline peer: a datagram echo server on the
// Go standard library's net.UDPConn, one goroutine per socket, each
// reading a datagram and writing it back (a system call each way). It
// prints "stdudp: udp echo on ADDR, pid N" once listening and exits on
// SIGINT or SIGTERM, printing the datagrams it echoed.
//
// -sockets N opens N sockets on the port with SO_REUSEPORT, so the kernel
// spreads peers over N goroutines (run it with GOMAXPROCS set to the CPUs
// it may use).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9002", "listen address")
	sockets := flag.Int("sockets", 1, "sockets on the port (SO_REUSEPORT), one goroutine each")
	flag.Parse()
	if err := run(*addr, *sockets); err != nil {
		fmt.Fprintln(os.Stderr, "stdudp:", err)
		os.Exit(1)
	}
}

func run(addr string, sockets int) error {
	if sockets < 1 {
		return errors.New("-sockets must be positive")
	}
	lc := net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if sockets > 1 {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}
		})
		return errors.Join(err, serr)
	}}
	var conns []*net.UDPConn
	for i := 0; i < sockets; i++ {
		if i == 1 {
			addr = conns[0].LocalAddr().String()
		}
		pc, err := lc.ListenPacket(context.Background(), "udp", addr)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return err
		}
		c := pc.(*net.UDPConn)
		// The same socket buffers veloq's sockets ask for by default.
		_ = c.SetReadBuffer(4 << 20)
		_ = c.SetWriteBuffer(4 << 20)
		conns = append(conns, c)
	}
	fmt.Printf("stdudp: udp echo on %s, pid %d\n", conns[0].LocalAddr(), os.Getpid())
	var echoed atomic.Uint64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 65536)
			for {
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					if errors.Is(err, net.ErrClosed) {
						return
					}
					continue // an ICMP error or the like: the socket goes on
				}
				if _, err := c.WriteToUDPAddrPort(buf[:n], from); err == nil {
					echoed.Add(1)
				}
			}
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	fmt.Printf("stdudp: %d datagrams echoed\n", echoed.Load())
	return nil
}
