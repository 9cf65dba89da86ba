// Command tcpload is a closed-loop TCP echo load generator.
//
// Each connection is driven by its own goroutine: it writes a message of
// -size bytes (a deterministic pattern that changes from message to message),
// reads exactly that many bytes back, checks them byte for byte and records
// the round trip in its own HDR histogram. With -pipeline N > 1 a writer
// goroutine keeps up to N messages in flight per connection (batched into one
// write when several slots are free) and the reader times each one from its
// write to the last byte of its echo. Histograms are merged at the end.
//
// The run is bounded: -warmup, then the measured window of -duration, then
// in-flight messages drain (at most 5 s, enforced by socket deadlines) and
// the process exits. Only loopback addresses are accepted.
//
// With -churn every request gets a connection of its own: -conns workers
// each connect, write one message, read its echo, close, and start over; the
// latency recorded is the whole cycle, connect included.
//
//	tcpload -addr 127.0.0.1:9000 -conns 64 -size 64 -duration 10s
//	tcpload -addr 127.0.0.1:9000 -json -server-pid 1234   # + server CPU over the window
//	tcpload -addr 127.0.0.1:9000 -idle 10000 -hold 30s     # open and hold idle connections
//	tcpload -addr 127.0.0.1:9000 -churn -conns 32          # a new connection per request
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/veloq/veloq/bench/internal/loopback"
	"github.com/veloq/veloq/bench/internal/proc"
	"github.com/veloq/veloq/bench/internal/result"
)

type config struct {
	addr         string
	conns        int
	size         int
	duration     time.Duration
	warmup       time.Duration
	pipeline     int
	json         bool
	serverPID    int
	dialTimeout  time.Duration
	dialParallel int
	idle         int
	hold         time.Duration
	churn        bool
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tcpload:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	var c config
	fs := flag.NewFlagSet("tcpload", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:9000", "server address (loopback only: 127.0.0.0/8, ::1 or localhost)")
	fs.IntVar(&c.conns, "conns", 64, "connections")
	fs.IntVar(&c.size, "size", 64, "message size in bytes")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured window")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "warmup before the measured window (not counted)")
	fs.IntVar(&c.pipeline, "pipeline", 1, "messages in flight per connection")
	fs.BoolVar(&c.json, "json", false, "print the result as one JSON object")
	fs.IntVar(&c.serverPID, "server-pid", 0, "if set, sample this process's CPU time (/proc) at the window's edges")
	fs.DurationVar(&c.dialTimeout, "dial-timeout", 5*time.Second, "timeout for each connect")
	fs.IntVar(&c.dialParallel, "dial-parallel", 64, "connects in progress at once")
	fs.IntVar(&c.idle, "idle", 0, "idle mode: open this many connections, echo one message on each, then hold them")
	fs.DurationVar(&c.hold, "hold", 30*time.Second, "idle mode: hold the connections this long at most (SIGINT/SIGTERM releases them earlier)")
	fs.BoolVar(&c.churn, "churn", false, "a new connection per request: -conns workers each connect, echo one message, close, repeat")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	addr, err := loopback.Addr(c.addr)
	if err != nil {
		return err
	}
	c.addr = addr
	switch {
	case c.size < 1 || c.size > 16<<20:
		return fmt.Errorf("-size %d: want 1..16 MiB", c.size)
	case c.pipeline < 1 || c.pipeline > 4096:
		return fmt.Errorf("-pipeline %d: want 1..4096", c.pipeline)
	case c.duration <= 0 || c.duration > time.Hour:
		return fmt.Errorf("-duration %v: want (0, 1h]", c.duration)
	case c.warmup < 0 || c.warmup > 10*time.Minute:
		return fmt.Errorf("-warmup %v: want [0, 10m]", c.warmup)
	case c.dialParallel < 1:
		return fmt.Errorf("-dial-parallel must be >= 1")
	case c.hold <= 0 || c.hold > time.Hour:
		return fmt.Errorf("-hold %v: want (0, 1h]", c.hold)
	}
	if c.idle > 0 {
		if c.churn {
			return errors.New("-idle and -churn exclude each other")
		}
		return runIdle(c, out)
	}
	if c.churn && c.pipeline != 1 {
		return errors.New("-churn sends one message per connection: -pipeline must be 1")
	}
	if c.conns < 1 || c.conns > 100000 {
		return fmt.Errorf("-conns %d: want 1..100000", c.conns)
	}
	return runLoad(c, out)
}

// The pattern every message is cut from: message n of connection i is
// pattern[(i+n)%256 : (i+n)%256+size], so consecutive messages differ and a
// lost, duplicated or reordered echo shows as a mismatch.
func makePattern(size int) []byte {
	p := make([]byte, size+256)
	for i := range p {
		p[i] = byte(i*131+i/251) ^ 0x5a
	}
	return p
}

func message(pattern []byte, conn, n, size int) []byte {
	off := (conn + n) & 255
	return pattern[off : off+size]
}

// dialAll opens n connections with at most parallel connects in flight; ping,
// if not nil, runs on each new connection. The result has a nil entry for
// every connection that failed.
func dialAll(ctx context.Context, c config, n int, ping func(i int, conn net.Conn) error) ([]net.Conn, *result.ErrCount) {
	conns := make([]net.Conn, n)
	errs := &result.ErrCount{}
	sem := make(chan struct{}, c.dialParallel)
	var wg sync.WaitGroup
	d := net.Dialer{Timeout: c.dialTimeout}
	for i := range n {
		if ctx.Err() != nil {
			errs.Add(fmt.Errorf("dial: %w", ctx.Err()))
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			conn, err := d.DialContext(ctx, "tcp", c.addr)
			if err != nil {
				errs.Add(fmt.Errorf("dial: %w", err))
				return
			}
			if ping != nil {
				if err := ping(i, conn); err != nil {
					conn.Close()
					errs.Add(err)
					return
				}
			}
			conns[i] = conn
		})
	}
	wg.Wait()
	return conns, errs
}

const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseStop
)

// Histogram range: 100 ns to 60 s at 3 significant digits.
func newHist() *hdr.Histogram { return hdr.New(100, 60e9, 3) }

// worker is one connection's driver and its private tallies.
type worker struct {
	id      int
	conn    net.Conn
	size    int
	pattern []byte
	phase   *atomic.Int32
	errs    *result.ErrCount

	hist       *hdr.Histogram
	requests   int64
	mismatches int64
	dialErrors int64 // churn mode only: the others dial up front
}

func (w *worker) fail(err error) {
	if w.phase.Load() == phaseStop && errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("conn %d: no echo within 5 s after the window closed: %w", w.id, err)
	}
	w.errs.Add(fmt.Errorf("conn %d: %w", w.id, err))
}

func (w *worker) mismatch(n int) {
	w.mismatches++
	w.errs.Add(fmt.Errorf("conn %d: message %d: echoed bytes differ from those sent", w.id, n))
}

// runSerial drives one message at a time: write, read it back, repeat.
func (w *worker) runSerial() {
	rbuf := make([]byte, w.size)
	for n := 0; w.phase.Load() != phaseStop; n++ {
		msg := message(w.pattern, w.id, n, w.size)
		t := time.Now()
		if _, err := w.conn.Write(msg); err != nil {
			w.fail(err)
			return
		}
		if _, err := io.ReadFull(w.conn, rbuf); err != nil {
			w.fail(err)
			return
		}
		d := time.Since(t)
		if !bytes.Equal(rbuf, msg) {
			// The stream's framing can no longer be trusted: stop this connection.
			w.mismatch(n)
			return
		}
		if w.phase.Load() == phaseMeasure {
			w.hist.RecordValue(int64(d))
			w.requests++
		}
	}
}

// runChurn opens a connection per message: connect, write, read the echo
// back, close. The time recorded runs from the start of the connect to the
// last byte of the echo. A failed connect is counted and retried after a
// short pause, so a refusing server cannot turn the worker into a busy loop.
func (w *worker) runChurn(addr string, dialTimeout time.Duration, deadline time.Time) {
	d := net.Dialer{Timeout: dialTimeout, Deadline: deadline}
	rbuf := make([]byte, w.size)
	for n := 0; w.phase.Load() != phaseStop; n++ {
		msg := message(w.pattern, w.id, n, w.size)
		t := time.Now()
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			w.dialErrors++
			w.fail(fmt.Errorf("dial: %w", err))
			time.Sleep(10 * time.Millisecond)
			continue
		}
		conn.SetDeadline(deadline)
		ok := w.echoOnce(conn, msg, rbuf, n)
		dur := time.Since(t)
		conn.Close()
		if ok && w.phase.Load() == phaseMeasure {
			w.hist.RecordValue(int64(dur))
			w.requests++
		}
	}
}

// echoOnce writes msg on conn and reads its echo into rbuf, counting any
// failure; it reports whether the echo came back intact.
func (w *worker) echoOnce(conn net.Conn, msg, rbuf []byte, n int) bool {
	if _, err := conn.Write(msg); err != nil {
		w.fail(err)
		return false
	}
	if _, err := io.ReadFull(conn, rbuf); err != nil {
		w.fail(err)
		return false
	}
	if !bytes.Equal(rbuf, msg) {
		w.mismatch(n)
		return false
	}
	return true
}

// runPipelined keeps up to depth messages in flight: a writer goroutine
// sends whenever a slot is free (all free slots in one write), this goroutine
// reads the echoes in order and frees the slots.
func (w *worker) runPipelined(depth int) {
	slots := make(chan struct{}, depth)
	for range depth {
		slots <- struct{}{}
	}
	sent := make(chan time.Time, depth)
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(done)

	wg.Go(func() {
		defer close(sent)
		wbuf := make([]byte, 0, depth*w.size)
		for n := 0; ; {
			select {
			case <-slots:
			case <-done:
				return
			}
			if w.phase.Load() == phaseStop {
				return
			}
			k := 1
		more:
			for k < depth {
				select {
				case <-slots:
					k++
				default:
					break more
				}
			}
			wbuf = wbuf[:0]
			for j := range k {
				wbuf = append(wbuf, message(w.pattern, w.id, n+j, w.size)...)
			}
			t := time.Now()
			for range k {
				sent <- t // cannot block: at most depth slots are out
			}
			n += k
			if _, err := w.conn.Write(wbuf); err != nil {
				select {
				case <-done: // the reader failed first and closed the conn
				default:
					w.fail(err)
					w.conn.Close() // unblock the reader
				}
				return
			}
		}
	})

	rbuf := make([]byte, w.size)
	n := 0
	for t := range sent {
		if _, err := io.ReadFull(w.conn, rbuf); err != nil {
			w.fail(err)
			w.conn.Close() // unblock the writer
			return
		}
		d := time.Since(t)
		if !bytes.Equal(rbuf, message(w.pattern, w.id, n, w.size)) {
			w.mismatch(n)
			w.conn.Close()
			return
		}
		if w.phase.Load() == phaseMeasure {
			w.hist.RecordValue(int64(d))
			w.requests++
		}
		n++
		slots <- struct{}{}
	}
}

func runLoad(c config, out io.Writer) error {
	if err := proc.RaiseNofile(uint64(c.conns) + 64); err != nil {
		return err
	}
	// One bound for everything: dials, warmup, window, drain.
	ctx, cancel := context.WithTimeout(context.Background(), c.warmup+c.duration+c.dialTimeout+30*time.Second)
	defer cancel()

	// Churn workers dial their own connections; the others share one set
	// opened up front.
	var conns []net.Conn
	errs := &result.ErrCount{}
	if c.churn {
		conns = make([]net.Conn, c.conns)
	} else {
		conns, errs = dialAll(ctx, c, c.conns, nil)
	}
	pattern := makePattern(c.size)
	var phase atomic.Int32
	var workers []*worker
	for i, conn := range conns {
		if conn != nil || c.churn {
			workers = append(workers, &worker{id: i, conn: conn, size: c.size, pattern: pattern,
				phase: &phase, errs: errs, hist: newHist()})
		}
	}
	dialErrors := errs.N()
	if len(workers) == 0 {
		return fmt.Errorf("no connection to %s could be opened (%d failures; first: %s)", c.addr, dialErrors, errs.First())
	}

	start := time.Now()
	deadline := start.Add(c.warmup + c.duration + 5*time.Second)
	var wg sync.WaitGroup
	for _, w := range workers {
		if c.churn {
			wg.Go(func() { w.runChurn(c.addr, c.dialTimeout, deadline) })
			continue
		}
		w.conn.SetDeadline(deadline)
		wg.Go(func() {
			defer w.conn.Close()
			if c.pipeline == 1 {
				w.runSerial()
			} else {
				w.runPipelined(c.pipeline)
			}
		})
	}

	time.Sleep(time.Until(start.Add(c.warmup)))
	self := os.Getpid()
	var s0, s1 proc.Sample
	var sampleErr error
	if c.serverPID > 0 {
		s0, sampleErr = proc.Take(c.serverPID)
	}
	c0, _ := proc.Take(self)
	phase.Store(phaseMeasure)
	t0 := time.Now()
	time.Sleep(c.duration)
	phase.Store(phaseStop)
	t1 := time.Now()
	c1, _ := proc.Take(self)
	var rss int64
	if c.serverPID > 0 && sampleErr == nil {
		s1, sampleErr = proc.Take(c.serverPID)
		rss, _ = proc.RSSKiB(c.serverPID)
	}
	window := t1.Sub(t0).Seconds()

	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(time.Until(deadline) + 5*time.Second):
		return errors.New("connections did not finish 10 s after the window closed")
	}

	total := newHist()
	r := result.Load{
		Tool: "tcpload", Addr: c.addr, Conns: c.conns, ConnsOK: len(workers), Size: c.size, Churn: c.churn,
		Pipeline: c.pipeline, WarmupS: c.warmup.Seconds(), WindowS: window,
		Errors: errs.N(), DialErrors: dialErrors, FirstError: errs.First(),
	}
	for _, w := range workers {
		total.Merge(w.hist)
		r.Requests += w.requests
		r.Mismatches += w.mismatches
		r.DialErrors += w.dialErrors
	}
	r.RPS = float64(r.Requests) / window
	r.BytesSent = r.Requests * int64(c.size)
	r.BytesRecv = r.BytesSent
	us := func(v int64) float64 { return float64(v) / 1e3 }
	r.Latency = result.Latency{
		P50: us(total.ValueAtQuantile(50)), P90: us(total.ValueAtQuantile(90)),
		P99: us(total.ValueAtQuantile(99)), P999: us(total.ValueAtQuantile(99.9)),
		Max: us(total.Max()), Mean: total.Mean() / 1e3,
	}
	r.ClientCPUS = proc.CPUBetween(c0, c1)
	r.ClientCPUUtil = r.ClientCPUS / window
	if c.serverPID > 0 {
		if sampleErr != nil {
			return fmt.Errorf("sampling server pid %d: %w", c.serverPID, sampleErr)
		}
		r.ServerPID = c.serverPID
		r.ServerCPUS = proc.CPUBetween(s0, s1)
		r.ServerCPUUtil = r.ServerCPUS / window
		if r.ServerCPUS > 0 {
			r.ReqPerServerCPUS = float64(r.Requests) / r.ServerCPUS
		}
		r.ServerRSSKiB = rss
	}

	if c.json {
		return json.NewEncoder(out).Encode(r)
	}
	how := fmt.Sprintf("%d/%d conns", r.ConnsOK, r.Conns)
	if c.churn {
		how = fmt.Sprintf("%d workers, a new connection per request", r.Conns)
	}
	fmt.Fprintf(out, "tcpload: %s, %s, %d B messages, pipeline %d, window %.2fs (after %v warmup)\n",
		r.Addr, how, r.Size, r.Pipeline, r.WindowS, c.warmup)
	fmt.Fprintf(out, "  requests   %d (%.0f req/s), %d bytes each way\n", r.Requests, r.RPS, r.BytesSent)
	fmt.Fprintf(out, "  latency    p50 %.1fµs  p90 %.1fµs  p99 %.1fµs  p99.9 %.1fµs  max %.1fµs  mean %.1fµs\n",
		r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.P999, r.Latency.Max, r.Latency.Mean)
	fmt.Fprintf(out, "  errors     %d (mismatches %d, dial %d)\n", r.Errors, r.Mismatches, r.DialErrors)
	if r.FirstError != "" {
		fmt.Fprintf(out, "  first err  %s\n", r.FirstError)
	}
	fmt.Fprintf(out, "  client CPU %.2fs (%.0f%% of one core)\n", r.ClientCPUS, 100*r.ClientCPUUtil)
	if r.ServerPID > 0 {
		fmt.Fprintf(out, "  server CPU %.2fs (%.0f%% of one core), %.0f req per server CPU-second, RSS %d KiB\n",
			r.ServerCPUS, 100*r.ServerCPUUtil, r.ReqPerServerCPUS, r.ServerRSSKiB)
	}
	return nil
}

// runIdle opens c.idle connections, echoes one message on each (so the
// server has really accepted and set each one up), prints a "ready" line,
// then holds them until -hold passes or SIGINT/SIGTERM arrives.
func runIdle(c config, out io.Writer) error {
	if c.idle > 200000 {
		return fmt.Errorf("-idle %d: want at most 200000", c.idle)
	}
	if err := proc.RaiseNofile(uint64(c.idle) + 64); err != nil {
		return err
	}
	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sig, c.hold+2*time.Minute)
	defer cancel()

	pattern := makePattern(c.size)
	start := time.Now()
	conns, errs := dialAll(ctx, c, c.idle, func(i int, conn net.Conn) error {
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		defer conn.SetDeadline(time.Time{})
		msg := message(pattern, i, 0, c.size)
		if _, err := conn.Write(msg); err != nil {
			return fmt.Errorf("conn %d: ping: %w", i, err)
		}
		buf := make([]byte, c.size)
		if _, err := io.ReadFull(conn, buf); err != nil {
			return fmt.Errorf("conn %d: ping: %w", i, err)
		}
		if !bytes.Equal(buf, msg) {
			return fmt.Errorf("conn %d: ping: echoed bytes differ", i)
		}
		return nil
	})
	r := result.Idle{Tool: "tcpload", Addr: c.addr, Conns: c.idle, OpenS: time.Since(start).Seconds()}
	for _, conn := range conns {
		if conn != nil {
			r.ConnsOK++
		}
	}
	fmt.Fprintf(out, "tcpload: ready %d/%d conns\n", r.ConnsOK, r.Conns)
	if f, ok := out.(*os.File); ok {
		f.Sync()
	}

	hold := time.NewTimer(c.hold)
	select {
	case <-hold.C:
	case <-sig.Done():
	}
	for _, conn := range conns {
		if conn != nil {
			conn.Close()
		}
	}
	r.Errors = errs.N()
	r.FirstError = errs.First()
	if c.json {
		return json.NewEncoder(out).Encode(r)
	}
	fmt.Fprintf(out, "tcpload: held %d/%d idle conns (opened in %.2fs), errors %d %s\n",
		r.ConnsOK, r.Conns, r.OpenS, r.Errors, r.FirstError)
	return nil
}
