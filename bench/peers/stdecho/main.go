// Command stdecho is the baseline peer: a TCP echo server on the Go standard
// library, one goroutine per connection, each echoing through its own 64 KiB
// buffer. It prints "stdecho: tcp echo on ADDR, pid N" once listening and
// exits on SIGINT or SIGTERM.
//
// With -work N every chunk read is hashed N times (FNV-1a over its bytes,
// the same cost echo-server's -work gives a message) before it is echoed,
// in the connection's goroutine: the Go scheduler shares the CPU between
// busy connections.
//
// With -tls-self-signed it is the crypto/tls echo baseline (go-tls in
// bench/tls.sh): the listener is wrapped in tls.NewListener with an ECDSA
// P-256 certificate made at start, crypto/tls's defaults otherwise
// (session tickets issued, as veloq's are), and each connection's
// goroutine reads plaintext through its tls.Conn. The handshake runs on
// that goroutine's first Read. On shutdown it prints the full and resumed
// handshakes it completed.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/veloq/veloq/bench/internal/selfsigned"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9001", "listen address")
	work := flag.Int("work", 0, "CPU cost per chunk read: rounds of FNV-1a hashing over it")
	selfSigned := flag.Bool("tls-self-signed", false, "serve TLS echo with a self-signed ECDSA P-256 certificate made at start (clients must skip verification)")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stdecho:", err)
		os.Exit(1)
	}
	desc := "tcp echo"
	var hs selfsigned.Handshakes
	if *selfSigned {
		cert, err := selfsigned.New(24 * time.Hour)
		if err != nil {
			fmt.Fprintln(os.Stderr, "stdecho:", err)
			os.Exit(1)
		}
		ln = tls.NewListener(ln, hs.Config(cert))
		desc = "tls echo"
	}
	if *work > 0 {
		desc = fmt.Sprintf("%s with %d rounds of work per read", desc, *work)
	}
	fmt.Printf("stdecho: %s on %s, GOMAXPROCS %d, pid %d\n", desc, ln.Addr(), runtime.GOMAXPROCS(0), os.Getpid())

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
			echo(c, *work)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			c.Close()
		})
	}
	wg.Wait()
	if *selfSigned {
		fmt.Printf("stdecho: shut down: %d full TLS handshakes, %d resumed\n", hs.Full.Load(), hs.Resumed.Load())
		return
	}
	fmt.Println("stdecho: shut down")
}

// sink keeps the hashing from being optimized away.
var sink atomic.Uint64

func echo(c net.Conn, work int) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 && work > 0 {
			sink.Add(hash(buf[:n], work))
		}
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

// hash runs rounds of 64-bit FNV-1a over p.
func hash(p []byte, rounds int) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for range rounds {
		for _, b := range p {
			h = (h ^ uint64(b)) * prime
		}
	}
	return h
}
