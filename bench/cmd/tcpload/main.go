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
// With -tls every connection speaks TLS 1.3 (crypto/tls, X25519, no session
// cache: with -churn every connection is a full handshake). With -http the
// exchange is an HTTP/1.1 GET / instead of an echo: the answer must be a 200
// whose body is -expect (keep-alive, or "Connection: close" with -churn), so
// the same load runs against HTTP(S) servers, e.g. a full TLS handshake per
// request, which wrk cannot make (it resumes TLS sessions when it
// reconnects).
//
//	tcpload -addr 127.0.0.1:9000 -conns 64 -size 64 -duration 10s
//	tcpload -addr 127.0.0.1:9000 -json -server-pid 1234   # + server CPU over the window
//	tcpload -addr 127.0.0.1:9000 -idle 10000 -hold 30s     # open and hold idle connections
//	tcpload -addr 127.0.0.1:9000 -churn -conns 32          # a new connection per request
//	tcpload -addr 127.0.0.1:9443 -tls -churn -http         # a full TLS handshake per HTTPS request
//	tcpload -addr 127.0.0.1:9443 -tls -idle 10000 -server-pid 1234 -json  # server KiB per idle TLS conn
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
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
	tls          bool
	http         bool
	expect       string
	rate         float64     // messages (requests) per second over all connections; 0: as fast as answers come
	tlsConfig    *tls.Config // with -tls: every connection's client configuration
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
	fs.BoolVar(&c.tls, "tls", false, "speak TLS 1.3 (X25519, no session resumption: every connection is a full handshake; the server's certificate is not verified)")
	fs.BoolVar(&c.http, "http", false, "the exchange is an HTTP/1.1 GET / answered by 200 and -expect (keep-alive; \"Connection: close\" with -churn) instead of an echo; -size is unused")
	fs.StringVar(&c.expect, "expect", "Hello, World!", "with -http, the body GET / must answer")
	fs.Float64Var(&c.rate, "rate", 0, "send at most this many messages (or requests) per second over all connections, each connection evenly paced (one at a time only; 0: as fast as the answers come); compares servers at the same load instead of each at its own")
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
	if c.tls {
		c.tlsConfig = clientTLS()
	}
	if c.http && c.expect == "" {
		return errors.New("-expect must not be empty: the body is how a wrong answer is caught")
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
	if c.http && c.pipeline != 1 {
		return errors.New("-http sends one request at a time: -pipeline must be 1")
	}
	if c.rate < 0 || (c.rate > 0 && (c.churn || c.pipeline != 1)) {
		return errors.New("-rate must be >= 0 and paces one message at a time per kept connection: not with -churn or -pipeline")
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

// clientTLS is the configuration of every -tls connection.
func clientTLS() *tls.Config {
	return &tls.Config{
		// The servers under test present throwaway self-signed
		// certificates (echo-server and the peers' -tls-self-signed, the
		// nginx certificate bench/tls.sh makes), and loopback.Addr has
		// already refused every address that is not this machine's, so
		// there is nobody to authenticate. The client still checks the
		// server's handshake signature against the certificate's key, so
		// the server does all of a real handshake's work.
		InsecureSkipVerify: true,
		// TLS 1.3 with X25519 alone: what wrk and nginx (OpenSSL 3.0)
		// settle on too, so handshake figures from tcpload and wrk
		// compare. Go would otherwise offer Go servers the costlier
		// X25519MLKEM768 hybrid.
		MinVersion:       tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{tls.X25519},
		// No ClientSessionCache, so no ticket is kept and no connection
		// resumes a session: each is a full handshake (certificate and
		// signature included), which is the cost -churn measures. The
		// tickets servers send after the handshake are read and dropped.
		ClientSessionCache: nil,
	}
}

// dial opens one connection to c.addr; with -tls it returns once the
// handshake is done, the whole within d's timeout and deadline.
func (c config) dial(ctx context.Context, d *net.Dialer) (net.Conn, error) {
	if c.tlsConfig == nil {
		return d.DialContext(ctx, "tcp", c.addr)
	}
	td := tls.Dialer{NetDialer: d, Config: c.tlsConfig}
	return td.DialContext(ctx, "tcp", c.addr)
}

// httpGet is the -http exchange: GET / and its answer, which must be a 200
// whose Content-Length body is the expected one. One per connection at a
// time (it holds the connection's read buffer).
type httpGet struct {
	req    []byte
	expect []byte
	body   []byte
	br     *bufio.Reader
}

// errBody marks an answer that came whole but was not the expected one: a
// mismatch, like an echo that differs.
var errBody = errors.New("answer differs from the expected 200 and body")

func newHTTPGet(c config) *httpGet {
	connHdr := ""
	if c.churn {
		connHdr = "Connection: close\r\n"
	}
	return &httpGet{
		req:    []byte("GET / HTTP/1.1\r\nHost: " + c.addr + "\r\n" + connHdr + "\r\n"),
		expect: []byte(c.expect),
		body:   make([]byte, len(c.expect)),
		br:     bufio.NewReaderSize(nil, 4096),
	}
}

// roundTrip writes the request on conn and reads the answer through h.br,
// which must read from conn (h.br.Reset(conn) when the connection is new).
// It understands just what the servers under test answer: a status line, headers
// and a Content-Length body; anything else is an error.
func (h *httpGet) roundTrip(conn net.Conn) error {
	if _, err := conn.Write(h.req); err != nil {
		return err
	}
	line, err := h.br.ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("status line: %w", err)
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("%w: status line %q", errBody, bytes.TrimSpace(line))
	}
	n := -1
	for {
		line, err = h.br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("header: %w", err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if n, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil || n < 0 {
				return fmt.Errorf("header %q: bad Content-Length", bytes.TrimSpace(line))
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return fmt.Errorf("header %q: only Content-Length bodies are read", bytes.TrimSpace(line))
		}
	}
	if n != len(h.expect) {
		return fmt.Errorf("%w: Content-Length %d, want %d", errBody, n, len(h.expect))
	}
	if _, err := io.ReadFull(h.br, h.body); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	if !bytes.Equal(h.body, h.expect) {
		return fmt.Errorf("%w: body %q", errBody, h.body)
	}
	return nil
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
			conn, err := c.dial(ctx, &d)
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

// pacer spaces one connection's messages every interval (-rate). A message
// that is late (the answer to the one before, or the sleep, overran its
// slot) goes at once and keeps the schedule, so the rate holds (Go's
// sleeps overshoot by up to a millisecond here, more than an interval at
// high rates); one more than maxLate late restarts the schedule from now
// instead (a stall does not turn into a catch-up run).
type pacer struct {
	every time.Duration
	next  time.Time
}

const maxLate = 50 * time.Millisecond

// newPacer paces connection i of n for rate messages a second over all
// of them, its first slot offset by i/n of an interval so the
// connections do not send in step.
func newPacer(rate float64, i, n int, start time.Time) *pacer {
	every := time.Duration(float64(n) / rate * float64(time.Second))
	return &pacer{every: every, next: start.Add(every * time.Duration(i) / time.Duration(n))}
}

// wait sleeps until the next slot.
func (p *pacer) wait() {
	if p == nil {
		return
	}
	now := time.Now()
	switch d := p.next.Sub(now); {
	case d > 0:
		time.Sleep(d)
	case -d > maxLate:
		p.next = now
	}
	p.next = p.next.Add(p.every)
}

// worker is one connection's driver and its private tallies.
type worker struct {
	id      int
	conn    net.Conn
	size    int
	pattern []byte
	phase   *atomic.Int32
	errs    *result.ErrCount
	get     *httpGet // -http: the exchange is a GET instead of an echo
	pace    *pacer   // -rate: when the next message may go; nil: at once

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

// runHTTP drives -http on one kept-alive connection: GET, answer, repeat.
func (w *worker) runHTTP() {
	w.get.br.Reset(w.conn)
	for n := 0; w.phase.Load() != phaseStop; n++ {
		w.pace.wait()
		t := time.Now()
		if !w.exchange(w.conn, nil, nil, n) {
			return
		}
		if w.phase.Load() == phaseMeasure {
			w.hist.RecordValue(int64(time.Since(t)))
			w.requests++
		}
	}
}

// exchange runs one request on conn: with -http a GET (w.get.br must read
// from conn), otherwise an echo of msg read back into rbuf. It counts any
// failure and reports whether the answer came back intact.
func (w *worker) exchange(conn net.Conn, msg, rbuf []byte, n int) bool {
	if w.get == nil {
		return w.echoOnce(conn, msg, rbuf, n)
	}
	if err := w.get.roundTrip(conn); err != nil {
		if errors.Is(err, errBody) {
			w.mismatches++
		}
		w.fail(fmt.Errorf("request %d: %w", n, err))
		return false
	}
	return true
}

// runSerial drives one message at a time: write, read it back, repeat.
func (w *worker) runSerial() {
	rbuf := make([]byte, w.size)
	for n := 0; w.phase.Load() != phaseStop; n++ {
		msg := message(w.pattern, w.id, n, w.size)
		w.pace.wait()
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
//
// With -tls the connect includes a full handshake; with -http the request
// says "Connection: close", so the server closes its side too.
func (w *worker) runChurn(c config, deadline time.Time) {
	d := net.Dialer{Timeout: c.dialTimeout, Deadline: deadline}
	rbuf := make([]byte, w.size)
	for n := 0; w.phase.Load() != phaseStop; n++ {
		msg := message(w.pattern, w.id, n, w.size)
		t := time.Now()
		conn, err := c.dial(context.Background(), &d)
		if err != nil {
			w.dialErrors++
			w.fail(fmt.Errorf("dial: %w", err))
			time.Sleep(10 * time.Millisecond)
			continue
		}
		conn.SetDeadline(deadline)
		if w.get != nil {
			w.get.br.Reset(conn)
		}
		ok := w.exchange(conn, msg, rbuf, n)
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
			w := &worker{id: i, conn: conn, size: c.size, pattern: pattern,
				phase: &phase, errs: errs, hist: newHist()}
			if c.http {
				w.get = newHTTPGet(c)
			}
			workers = append(workers, w)
		}
	}
	dialErrors := errs.N()
	if len(workers) == 0 {
		return fmt.Errorf("no connection to %s could be opened (%d failures; first: %s)", c.addr, dialErrors, errs.First())
	}

	start := time.Now()
	deadline := start.Add(c.warmup + c.duration + 5*time.Second)
	var wg sync.WaitGroup
	for i, w := range workers {
		if c.rate > 0 {
			w.pace = newPacer(c.rate, i, len(workers), start)
		}
		if c.churn {
			wg.Go(func() { w.runChurn(c, deadline) })
			continue
		}
		w.conn.SetDeadline(deadline)
		wg.Go(func() {
			defer w.conn.Close()
			switch {
			case c.http:
				w.runHTTP()
			case c.pipeline == 1:
				w.runSerial()
			default:
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
		TLS: c.tls, HTTP: c.http,
		Pipeline: c.pipeline, Rate: c.rate, WarmupS: c.warmup.Seconds(), WindowS: window,
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
	if c.http {
		// The answers' sizes differ from server to server (headers) and
		// are not counted: only the requests' are known.
		r.Size = 0
		r.BytesSent = r.Requests * int64(len(newHTTPGet(c).req))
		r.BytesRecv = 0
	}
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
		r.ServerSysS = proc.SysBetween(s0, s1)
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
	what := fmt.Sprintf("%d B messages", r.Size)
	if c.http {
		what = "GET /"
	}
	if c.tls {
		what += " over TLS"
	}
	fmt.Fprintf(out, "tcpload: %s, %s, %s, pipeline %d, window %.2fs (after %v warmup)\n",
		r.Addr, how, what, r.Pipeline, r.WindowS, c.warmup)
	if c.http {
		fmt.Fprintf(out, "  requests   %d (%.0f req/s), %d request bytes sent\n", r.Requests, r.RPS, r.BytesSent)
	} else {
		fmt.Fprintf(out, "  requests   %d (%.0f req/s), %d bytes each way\n", r.Requests, r.RPS, r.BytesSent)
	}
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

// idleResult is an idle run's outcome; with -server-pid, the server's
// memory too.
type idleResult struct {
	result.Idle
	TLS  bool `json:"tls,omitempty"`
	HTTP bool `json:"http,omitempty"`

	ServerPID          int     `json:"server_pid,omitempty"`
	ServerRSSBeforeKiB int64   `json:"server_rss_before_kib,omitempty"`
	ServerRSSAfterKiB  int64   `json:"server_rss_after_kib,omitempty"`
	ServerKiBPerConn   float64 `json:"server_kib_per_conn,omitempty"`
}

// runIdle opens c.idle connections, makes one exchange on each (an echo
// of -size bytes, or with -http a GET /, so that the server has really
// accepted and set up each one, TLS handshake included with -tls), prints
// a "ready" line, then holds them until -hold passes or SIGINT/SIGTERM
// arrives. With -server-pid it reads the server's VmRSS before the first
// connect and again at the end of the hold, with every connection still
// open, and reports the growth per connection held.
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

	r := idleResult{Idle: result.Idle{Tool: "tcpload", Addr: c.addr, Conns: c.idle}, TLS: c.tls, HTTP: c.http}
	if c.serverPID > 0 {
		rss, err := proc.RSSKiB(c.serverPID)
		if err != nil {
			return fmt.Errorf("reading server pid %d's RSS: %w", c.serverPID, err)
		}
		r.ServerPID, r.ServerRSSBeforeKiB = c.serverPID, rss
	}
	pattern := makePattern(c.size)
	start := time.Now()
	conns, errs := dialAll(ctx, c, c.idle, func(i int, conn net.Conn) error {
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		defer conn.SetDeadline(time.Time{})
		if c.http {
			// The reader is dropped after the answer: nothing more comes
			// on an idle connection, so the client keeps no buffer per
			// connection.
			g := newHTTPGet(c)
			g.br.Reset(conn)
			if err := g.roundTrip(conn); err != nil {
				return fmt.Errorf("conn %d: ping: %w", i, err)
			}
			return nil
		}
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
	r.OpenS = time.Since(start).Seconds()
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
	if c.serverPID > 0 {
		// Read while every connection is still open: the figure is what
		// the server holds for them, after the hold let it settle.
		if rss, err := proc.RSSKiB(c.serverPID); err == nil {
			r.ServerRSSAfterKiB = rss
			if r.ConnsOK > 0 {
				r.ServerKiBPerConn = float64(rss-r.ServerRSSBeforeKiB) / float64(r.ConnsOK)
			}
		}
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
	if r.ServerPID > 0 {
		fmt.Fprintf(out, "  server RSS %d -> %d KiB, %.2f KiB per idle conn\n",
			r.ServerRSSBeforeKiB, r.ServerRSSAfterKiB, r.ServerKiBPerConn)
	}
	return nil
}
