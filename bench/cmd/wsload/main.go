// Command wsload is a closed-loop WebSocket echo load generator, the
// WebSocket counterpart of tcpload, for comparing veloq's websocket
// package with gorilla/websocket and gobwas/ws.
//
// It speaks the protocol with veloq's frame codec (websocket.AppendHeader,
// MaskBytes, ParseHeader), identically against every server. Each
// connection is driven by its own goroutine: it sends one masked binary
// message of -size bytes, reads the echo frame, checks it byte for byte
// and records the round trip. The run is bounded: -warmup, then the window
// of -duration, then the process exits (socket deadlines bound the
// drain). Only loopback addresses are accepted.
//
// With -idle N it opens N upgraded connections, echoes one message on
// each, and holds them for -hold; with -server-pid it reports the server's
// RSS before and after, and so its memory per idle connection.
//
//	wsload -addr 127.0.0.1:9000 -conns 64 -size 64 -duration 10s -server-pid 1234 -json
//	wsload -addr 127.0.0.1:9000 -idle 10000 -hold 5s -server-pid 1234 -json
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/veloq/veloq/bench/internal/loopback"
	"github.com/veloq/veloq/bench/internal/proc"
	"github.com/veloq/veloq/bench/internal/result"
	"github.com/veloq/veloq/websocket"
)

type config struct {
	addr, path   string
	conns, size  int
	duration     time.Duration
	warmup       time.Duration
	json         bool
	serverPID    int
	idle         int
	hold         time.Duration
	dialParallel int
}

// IdleResult is an idle run's outcome, with the server's memory.
type IdleResult struct {
	result.Idle
	ServerPID          int     `json:"server_pid,omitempty"`
	ServerRSSBeforeKiB int64   `json:"server_rss_before_kib,omitempty"`
	ServerRSSAfterKiB  int64   `json:"server_rss_after_kib,omitempty"`
	ServerKiBPerConn   float64 `json:"server_kib_per_conn,omitempty"`
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "wsload:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	var c config
	fs := flag.NewFlagSet("wsload", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:9000", "server address (loopback only)")
	fs.StringVar(&c.path, "path", "/ws", "request path of the upgrade")
	fs.IntVar(&c.conns, "conns", 64, "connections")
	fs.IntVar(&c.size, "size", 64, "message size in bytes")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured window")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "warmup before the window (not counted)")
	fs.BoolVar(&c.json, "json", false, "print the result as one JSON object")
	fs.IntVar(&c.serverPID, "server-pid", 0, "sample this process's CPU time and RSS")
	fs.IntVar(&c.idle, "idle", 0, "idle mode: open this many connections, echo once on each, hold them")
	fs.DurationVar(&c.hold, "hold", 5*time.Second, "idle mode: how long to hold the connections")
	fs.IntVar(&c.dialParallel, "dial-parallel", 64, "handshakes in progress at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	addr, err := loopback.Addr(c.addr)
	if err != nil {
		return err
	}
	c.addr = addr
	switch {
	case c.size < 1 || c.size > 16<<20:
		return fmt.Errorf("-size %d: want 1..16 MiB", c.size)
	case c.duration <= 0 || c.duration > time.Hour:
		return fmt.Errorf("-duration %v: want (0, 1h]", c.duration)
	case c.warmup < 0 || c.warmup > 10*time.Minute:
		return fmt.Errorf("-warmup %v: want [0, 10m]", c.warmup)
	case c.hold <= 0 || c.hold > time.Hour:
		return fmt.Errorf("-hold %v: want (0, 1h]", c.hold)
	case c.idle < 0 || c.idle > 200000:
		return fmt.Errorf("-idle %d: want 0..200000", c.idle)
	case c.idle == 0 && (c.conns < 1 || c.conns > 100000):
		return fmt.Errorf("-conns %d: want 1..100000", c.conns)
	case c.dialParallel < 1:
		return errors.New("-dial-parallel must be >= 1")
	}
	if c.idle > 0 {
		return runIdle(c, out)
	}
	return runLoad(c, out)
}

// client is one upgraded connection.
type client struct {
	conn net.Conn
	br   *bufio.Reader
	wbuf []byte
	mask [4]byte
}

// dial opens a connection and completes the opening handshake.
func dial(ctx context.Context, addr, path string) (*client, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	var key [16]byte
	rand.Read(key[:])
	k := base64.StdEncoding.EncodeToString(key[:])
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n", path, addr, k)
	br := bufio.NewReaderSize(conn, 4096)
	status, err := br.ReadString('\n')
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("handshake: %w", err)
	}
	if !strings.HasPrefix(status, "HTTP/1.1 101") {
		conn.Close()
		return nil, fmt.Errorf("handshake: %q", strings.TrimSpace(status))
	}
	accepted := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("handshake: %w", err)
		}
		if line == "\r\n" {
			break
		}
		if name, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(name, "Sec-WebSocket-Accept") {
			accepted = strings.TrimSpace(v) == websocket.AcceptKey(k)
		}
	}
	if !accepted {
		conn.Close()
		return nil, errors.New("handshake: wrong or missing Sec-WebSocket-Accept")
	}
	conn.SetDeadline(time.Time{})
	c := &client{conn: conn, br: br}
	rand.Read(c.mask[:])
	return c, nil
}

// echo sends msg as one masked binary frame and checks the echo. msg and
// the client's mask never change during a run, so the masked frame is
// built once and then resent as it is: the load generator's CPU goes to
// the exchange, not to re-masking.
func (c *client) echo(msg []byte, got []byte) error {
	if c.wbuf == nil {
		h := websocket.Header{Fin: true, Opcode: websocket.OpBinary, Masked: true, Mask: c.mask, Length: int64(len(msg))}
		c.wbuf = websocket.AppendHeader(nil, &h)
		k := len(c.wbuf)
		c.wbuf = append(c.wbuf, msg...)
		websocket.MaskBytes(c.mask, 0, c.wbuf[k:])
	}
	if _, err := c.conn.Write(c.wbuf); err != nil {
		return err
	}
	// The echo may come back in fragments (gorilla writes a message in
	// frames of its write buffer's size): read frames up to the final one.
	n := 0
	for first := true; ; first = false {
		var hb [10]byte
		if _, err := io.ReadFull(c.br, hb[:2]); err != nil {
			return err
		}
		need := 2
		switch hb[1] & 0x7F {
		case 126:
			need = 4
		case 127:
			need = 10
		}
		if _, err := io.ReadFull(c.br, hb[2:need]); err != nil {
			return err
		}
		rh, _, err := websocket.ParseHeader(hb[:need])
		if err != nil {
			return err
		}
		wantOp := websocket.OpContinuation
		if first {
			wantOp = websocket.OpBinary
		}
		if rh.Opcode != wantOp || rh.Masked || int64(n)+rh.Length > int64(len(msg)) {
			return fmt.Errorf("echo frame %+v after %d of %d bytes", rh, n, len(msg))
		}
		if _, err := io.ReadFull(c.br, got[n:n+int(rh.Length)]); err != nil {
			return err
		}
		n += int(rh.Length)
		if rh.Fin {
			break
		}
	}
	if n != len(msg) {
		return fmt.Errorf("echo of %d bytes for %d", n, len(msg))
	}
	if !bytes.Equal(got[:len(msg)], msg) {
		return errors.New("echoed bytes differ")
	}
	return nil
}

// dialAll upgrades n connections, dialParallel at a time.
func dialAll(ctx context.Context, c config, n int) ([]*client, *result.ErrCount) {
	clients := make([]*client, n)
	errs := &result.ErrCount{}
	sem := make(chan struct{}, c.dialParallel)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cl, err := dial(ctx, c.addr, c.path)
			if err != nil {
				errs.Add(err)
				return
			}
			clients[i] = cl
		})
	}
	wg.Wait()
	return clients, errs
}

func pattern(size int) []byte {
	p := make([]byte, size)
	for i := range p {
		p[i] = byte(i*131) ^ 0x5a
	}
	return p
}

func runIdle(c config, out io.Writer) error {
	if err := proc.RaiseNofile(uint64(c.idle) + 64); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.hold+2*time.Minute)
	defer cancel()
	sig, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := IdleResult{Idle: result.Idle{Tool: "wsload", Addr: c.addr, Conns: c.idle}, ServerPID: c.serverPID}
	if c.serverPID > 0 {
		r.ServerRSSBeforeKiB, _ = proc.RSSKiB(c.serverPID)
	}
	start := time.Now()
	clients, errs := dialAll(ctx, c, c.idle)
	msg := pattern(c.size)
	got := make([]byte, c.size)
	for _, cl := range clients {
		if cl == nil {
			continue
		}
		cl.conn.SetDeadline(time.Now().Add(10 * time.Second))
		if err := cl.echo(msg, got); err != nil {
			errs.Add(err)
			continue
		}
		cl.conn.SetDeadline(time.Time{})
		r.ConnsOK++
	}
	r.OpenS = time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "wsload: ready %d/%d conns\n", r.ConnsOK, r.Conns)
	t := time.NewTimer(c.hold)
	select {
	case <-t.C:
	case <-sig.Done():
	}
	if c.serverPID > 0 {
		r.ServerRSSAfterKiB, _ = proc.RSSKiB(c.serverPID)
		if r.ConnsOK > 0 {
			r.ServerKiBPerConn = float64(r.ServerRSSAfterKiB-r.ServerRSSBeforeKiB) / float64(r.ConnsOK)
		}
	}
	for _, cl := range clients {
		if cl != nil {
			cl.conn.Close()
		}
	}
	r.Errors, r.FirstError = errs.N(), errs.First()
	if c.json {
		return json.NewEncoder(out).Encode(r)
	}
	fmt.Fprintf(out, "wsload: held %d/%d idle websocket conns (opened in %.2fs); server RSS %d -> %d KiB, %.2f KiB/conn; errors %d %s\n",
		r.ConnsOK, r.Conns, r.OpenS, r.ServerRSSBeforeKiB, r.ServerRSSAfterKiB, r.ServerKiBPerConn, r.Errors, r.FirstError)
	return nil
}

func runLoad(c config, out io.Writer) error {
	if err := proc.RaiseNofile(uint64(c.conns) + 64); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.warmup+c.duration+time.Minute)
	defer cancel()
	clients, errs := dialAll(ctx, c, c.conns)
	var live []*client
	for _, cl := range clients {
		if cl != nil {
			live = append(live, cl)
		}
	}
	if len(live) == 0 {
		return fmt.Errorf("no connection to %s could be upgraded (first error: %s)", c.addr, errs.First())
	}
	var measuring, stop atomic.Bool
	hists := make([]*hdr.Histogram, len(live))
	counts := make([]int64, len(live))
	msg := pattern(c.size)
	var wg sync.WaitGroup
	for i, cl := range live {
		hists[i] = hdr.New(100, 60e9, 3)
		wg.Go(func() {
			got := make([]byte, c.size)
			// One deadline bounds the whole run (warmup, window, drain).
			cl.conn.SetDeadline(time.Now().Add(c.warmup + c.duration + 10*time.Second))
			for !stop.Load() {
				t0 := time.Now()
				if err := cl.echo(msg, got); err != nil {
					errs.Add(err)
					return
				}
				if measuring.Load() {
					hists[i].RecordValue(time.Since(t0).Nanoseconds())
					counts[i]++
				}
			}
		})
	}
	time.Sleep(c.warmup) // the warmup is a span of load, not synchronization
	var before, after proc.Sample
	if c.serverPID > 0 {
		before, _ = proc.Take(c.serverPID)
	}
	self0, _ := proc.Take(os.Getpid())
	t0 := time.Now()
	measuring.Store(true)
	time.Sleep(c.duration)
	measuring.Store(false)
	window := time.Since(t0).Seconds()
	self1, _ := proc.Take(os.Getpid())
	if c.serverPID > 0 {
		after, _ = proc.Take(c.serverPID)
	}
	stop.Store(true)
	wg.Wait()
	for _, cl := range live {
		cl.conn.Close()
	}

	all := hdr.New(100, 60e9, 3)
	var n int64
	for i := range hists {
		all.Merge(hists[i])
		n += counts[i]
	}
	us := func(q float64) float64 { return float64(all.ValueAtQuantile(q)) / 1e3 }
	r := result.Load{Tool: "wsload", Addr: c.addr, Conns: c.conns, ConnsOK: len(live), Size: c.size, Pipeline: 1,
		WarmupS: c.warmup.Seconds(), WindowS: window, Requests: n, RPS: float64(n) / window,
		BytesSent: n * int64(c.size), BytesRecv: n * int64(c.size), Errors: errs.N(), FirstError: errs.First(),
		Latency: result.Latency{P50: us(50), P90: us(90), P99: us(99), P999: us(99.9), Max: float64(all.Max()) / 1e3, Mean: all.Mean() / 1e3}}
	r.ClientCPUS = proc.CPUBetween(self0, self1)
	r.ClientCPUUtil = r.ClientCPUS / window
	if c.serverPID > 0 {
		r.ServerPID = c.serverPID
		r.ServerCPUS = proc.CPUBetween(before, after)
		r.ServerSysS = proc.SysBetween(before, after)
		r.ServerCPUUtil = r.ServerCPUS / window
		if r.ServerCPUS > 0 {
			r.ReqPerServerCPUS = float64(n) / r.ServerCPUS
		}
		r.ServerRSSKiB, _ = proc.RSSKiB(c.serverPID)
	}
	if c.json {
		return json.NewEncoder(out).Encode(r)
	}
	fmt.Fprintf(out, "wsload: %d conns x %d B: %.0f msg/s, p50 %.0f us, p99 %.0f us, server CPU %.2f (%.0f msg per server CPU-s), errors %d %s\n",
		len(live), c.size, r.RPS, r.Latency.P50, r.Latency.P99, r.ServerCPUUtil, r.ReqPerServerCPUS, r.Errors, r.FirstError)
	return nil
}
