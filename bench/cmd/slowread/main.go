// Command slowread measures what stalled readers cost a server: -conns
// clients each send -size bytes to an echo server (directly or through a
// proxy) with a small receive buffer and read nothing for -stall, while
// the server's resident memory is sampled from /proc every 20 ms. Then
// they read every byte back and check it. It prints the server's RSS
// before, at its peak during the stall, and the growth.
//
//	slowread -addr 127.0.0.1:9000 -server-pid 1234 -conns 16 -size 8MiB -stall 2s
//
// Only loopback addresses are accepted; the run is bounded by -timeout.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veloq/veloq/bench/internal/loopback"
	"github.com/veloq/veloq/bench/internal/proc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "slowread:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:9000", "echo server (or proxy) address, loopback only")
	pid := flag.Int("server-pid", 0, "pid whose RSS is sampled (required)")
	conns := flag.Int("conns", 16, "stalled clients")
	size := flag.Int("size", 8<<20, "bytes each client sends")
	stall := flag.Duration("stall", 2*time.Second, "how long the clients do not read")
	rcvbuf := flag.Int("rcvbuf", 64<<10, "client SO_RCVBUF")
	timeout := flag.Duration("timeout", 60*time.Second, "bound on the whole run")
	flag.Parse()
	target, err := loopback.Addr(*addr)
	if err != nil {
		return err
	}
	if *pid <= 0 {
		return errors.New("-server-pid is required")
	}
	base, err := proc.RSSKiB(*pid)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(*timeout)
	cs := make([]*net.TCPConn, *conns)
	for i := range cs {
		c, err := net.DialTimeout("tcp", target, 5*time.Second)
		if err != nil {
			return err
		}
		tc := c.(*net.TCPConn)
		if err := tc.SetReadBuffer(*rcvbuf); err != nil {
			return err
		}
		tc.SetDeadline(deadline)
		cs[i] = tc
		defer tc.Close()
	}
	var peak atomic.Int64
	peak.Store(base)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if r, err := proc.RSSKiB(*pid); err == nil && r > peak.Load() {
					peak.Store(r)
				}
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 2**conns)
	start := time.Now()
	for i, c := range cs {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			for off := 0; off < *size; off += len(buf) {
				fill(buf[:min(len(buf), *size-off)], id, off)
				if _, err := c.Write(buf[:min(len(buf), *size-off)]); err != nil {
					errs <- fmt.Errorf("client %d write: %w", id, err)
					return
				}
			}
		}(i)
	}
	time.Sleep(*stall) // the stall is what is measured
	stallRSS := peak.Load()
	for i, c := range cs {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			got := make([]byte, 64<<10)
			want := make([]byte, 64<<10)
			for off := 0; off < *size; off += len(got) {
				n := min(len(got), *size-off)
				if _, err := io.ReadFull(c, got[:n]); err != nil {
					errs <- fmt.Errorf("client %d read at %d: %w", id, off, err)
					return
				}
				fill(want[:n], id, off)
				if !bytes.Equal(got[:n], want[:n]) {
					errs <- fmt.Errorf("client %d: echo differs at %d", id, off)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		return err
	}
	fmt.Printf("rss_before_kib %d\nrss_peak_stall_kib %d\nrss_peak_kib %d\ngrowth_stall_kib %d\ngrowth_kib %d\nbytes %d\nelapsed %v\n",
		base, stallRSS, peak.Load(), stallRSS-base, peak.Load()-base, int64(*conns)*int64(*size), time.Since(start).Round(time.Millisecond))
	return nil
}

// fill writes stream id's bytes from offset off.
func fill(p []byte, id, off int) {
	for i := range p {
		k := off + i
		p[i] = byte(k*7 + k>>9 + id)
	}
}
