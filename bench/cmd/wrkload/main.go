// Command wrkload runs wrk against an HTTP server and prints the outcome as
// the result.Load JSON that benchrun reads, with the server's CPU time over
// the measured run.
//
// It first checks that GET -path answers 200 with the -expect body (so every
// server under test does the same work), then runs wrk for the warmup, then
// samples the server's utime+stime, runs wrk for the measured window and
// samples again. wrk runs with one thread (-t1): pin wrkload with taskset and
// wrk inherits the CPU. A Lua script (written to a temporary directory)
// reports wrk's totals, error counts and latency percentiles as JSON from
// wrk's done() hook, which is more exact than wrk's rounded text; the text,
// with --latency, goes to stderr for the log.
//
//	wrkload -addr 127.0.0.1:8080 -conns 64 -duration 10s
//	wrkload -addr 127.0.0.1:8080 -pipeline 16 -json -server-pid 1234
//
// wrk counts time in whole seconds, so -warmup and -duration are rounded up
// to whole seconds. With -pipeline N, wrk sends N requests back to back and
// times the batch: the latency is that of the last response of each batch.
// wrk also applies its own coordinated-omission correction to the latency
// histogram, so its percentiles are not comparable with tcpload's.
// Only loopback addresses are accepted.
//
// With -tls the URL is https:// (wrk does not verify certificates, nor does
// the preflight: the servers' certificates are self-signed and the address
// is loopback). With -close every request says "Connection: close", so wrk
// opens a connection per request; the result then carries the TCP
// connections accepted on this machine over the measured run
// (tcp_passive_opens), to check that it did. Note that wrk (OpenSSL) resumes
// the TLS session on each reconnect when the server issues tickets: for a
// full handshake per request use tcpload -tls -http -churn.
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
	"math"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/veloq/veloq/bench/internal/loopback"
	"github.com/veloq/veloq/bench/internal/proc"
	"github.com/veloq/veloq/bench/internal/result"
)

type config struct {
	addr      string
	path      string
	expect    string
	conns     int
	pipeline  int
	warmup    time.Duration
	duration  time.Duration
	timeout   time.Duration
	serverPID int
	json      bool
	wrk       string
	tls       bool
	close     bool
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "wrkload:", err)
		os.Exit(1)
	}
}

func run(args []string, out, log io.Writer) error {
	var c config
	fs := flag.NewFlagSet("wrkload", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "server address (loopback only: 127.0.0.0/8, ::1 or localhost)")
	fs.StringVar(&c.path, "path", "/", "request path")
	fs.StringVar(&c.expect, "expect", "Hello, World!", "body GET -path must answer before the run (empty: any 200)")
	fs.IntVar(&c.conns, "conns", 64, "keep-alive connections")
	fs.IntVar(&c.pipeline, "pipeline", 1, "requests sent back to back per connection")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "warmup run before the measured one (rounded up to whole seconds; 0 = none)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured run (rounded up to whole seconds)")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "wrk's per-request timeout")
	fs.IntVar(&c.serverPID, "server-pid", 0, "if set, sample this process's CPU time (/proc) around the measured run")
	fs.BoolVar(&c.json, "json", false, "print the result as one JSON object")
	fs.StringVar(&c.wrk, "wrk", "wrk", "wrk binary")
	fs.BoolVar(&c.tls, "tls", false, "https:// (no certificate verification: for self-signed benchmark servers on loopback)")
	fs.BoolVar(&c.close, "close", false, `send "Connection: close": a new connection per request (wrk resumes TLS sessions when the server allows)`)
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
	case c.conns < 1 || c.conns > 100000:
		return fmt.Errorf("-conns %d: want 1..100000", c.conns)
	case c.pipeline < 1 || c.pipeline > 1024:
		return fmt.Errorf("-pipeline %d: want 1..1024", c.pipeline)
	case c.duration <= 0 || c.duration > time.Hour:
		return fmt.Errorf("-duration %v: want (0, 1h]", c.duration)
	case c.warmup < 0 || c.warmup > 10*time.Minute:
		return fmt.Errorf("-warmup %v: want [0, 10m]", c.warmup)
	case c.timeout < time.Second:
		return fmt.Errorf("-timeout %v: want at least 1s", c.timeout)
	case !strings.HasPrefix(c.path, "/"):
		return fmt.Errorf("-path %q must start with /", c.path)
	case c.close && c.pipeline != 1:
		return errors.New("-close ends the connection after each request: -pipeline must be 1")
	}
	wrk, err := exec.LookPath(c.wrk)
	if err != nil {
		return fmt.Errorf("%s not found: install it (apt-get install wrk): %w", c.wrk, err)
	}
	c.wrk = wrk
	// On SIGINT or SIGTERM, wrk is killed and reaped before wrkload exits.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := runLoad(ctx, c, log)
	if err != nil {
		return err
	}
	if c.json {
		return json.NewEncoder(out).Encode(r)
	}
	printText(out, r)
	return nil
}

// wholeSeconds rounds d up to whole seconds, as wrk wants them.
func wholeSeconds(d time.Duration) int {
	return int(math.Ceil(d.Seconds()))
}

func runLoad(ctx context.Context, c config, log io.Writer) (*result.Load, error) {
	scheme := "http://"
	if c.tls {
		scheme = "https://"
	}
	url := scheme + c.addr + c.path
	if err := preflight(url, c.expect); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "wrkload-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "report.lua")
	if err := os.WriteFile(script, []byte(luaScript), 0o644); err != nil {
		return nil, err
	}
	wrkArgs := func(secs int) []string {
		a := []string{"-t1", "-c" + strconv.Itoa(c.conns), "-d" + strconv.Itoa(secs) + "s",
			"--timeout", strconv.Itoa(wholeSeconds(c.timeout)) + "s", "--latency"}
		if c.close {
			a = append(a, "-H", "Connection: close")
		}
		return append(a, "-s", script, url, "--", strconv.Itoa(c.pipeline))
	}

	if c.warmup > 0 {
		secs := wholeSeconds(c.warmup)
		if _, _, err := runWrk(ctx, c.wrk, secs, wrkArgs(secs), log); err != nil {
			return nil, fmt.Errorf("warmup: %w", err)
		}
	}
	var s0, s1 proc.Sample
	if c.serverPID > 0 {
		if s0, err = proc.Take(c.serverPID); err != nil {
			return nil, fmt.Errorf("sampling server pid %d: %w", c.serverPID, err)
		}
	}
	opens0, opensErr := proc.PassiveOpens()
	t0 := time.Now()
	secs := wholeSeconds(c.duration)
	stdout, clientCPU, err := runWrk(ctx, c.wrk, secs, wrkArgs(secs), log)
	wall := time.Since(t0).Seconds()
	if err != nil {
		return nil, err
	}
	opens1, opensErr1 := proc.PassiveOpens()
	var rss int64
	if c.serverPID > 0 {
		if s1, err = proc.Take(c.serverPID); err != nil {
			return nil, fmt.Errorf("sampling server pid %d: %w", c.serverPID, err)
		}
		rss, _ = proc.RSSKiB(c.serverPID)
	}
	rep, err := parseReport(stdout)
	if err != nil {
		return nil, err
	}

	r := rep.load()
	r.Addr, r.Conns, r.Pipeline, r.WarmupS = c.addr, c.conns, c.pipeline, float64(wholeSeconds(c.warmup))
	r.TLS, r.Churn = c.tls, c.close
	if c.close && opensErr == nil && opensErr1 == nil {
		r.PassiveOpens = opens1 - opens0
	}
	r.ClientCPUS = clientCPU
	r.ClientCPUUtil = clientCPU / wall
	if c.serverPID > 0 {
		// The CPU window is wrk's whole life (connects and teardown
		// included), a few milliseconds longer than its measured run.
		r.ServerPID = c.serverPID
		r.ServerCPUS = proc.CPUBetween(s0, s1)
		r.ServerSysS = proc.SysBetween(s0, s1)
		r.ServerCPUUtil = r.ServerCPUS / wall
		if r.ServerCPUS > 0 {
			r.ReqPerServerCPUS = float64(r.Requests) / r.ServerCPUS
		}
		r.ServerRSSKiB = rss
	}
	return r, nil
}

// preflight fetches url once and checks the answer, so that a server that
// answers something else (a 404, another body) fails loudly instead of
// being benchmarked on different work.
func preflight(url, expect string) error {
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		// https:// is only used against the benchmarks' self-signed
		// servers on a loopback address (checked in run), as wrk, which
		// verifies nothing, will be.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	defer cl.CloseIdleConnections()
	resp, err := cl.Get(url)
	if err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("preflight: reading the body: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("preflight: GET %s: status %s, want 200", url, resp.Status)
	}
	if expect != "" && string(body) != expect {
		return fmt.Errorf("preflight: GET %s: body %q, want %q", url, body, expect)
	}
	return nil
}

// runWrk runs wrk (a run of secs seconds) to completion, copies its output
// to log and returns its stdout and the CPU time it used (user + system, all
// threads).
func runWrk(ctx context.Context, bin string, secs int, args []string, log io.Writer) (stdout []byte, cpuS float64, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, log)
	cmd.Stderr = log
	// wrk dies with us; a stuck wrk is killed at the context's deadline.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(log, "$ %s %s\n", bin, strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, 0, fmt.Errorf("%s: %w", bin, err)
	}
	st := cmd.ProcessState
	return out.Bytes(), (st.UserTime() + st.SystemTime()).Seconds(), nil
}

// reportPrefix starts the line the Lua script prints from done().
const reportPrefix = "WRKLOAD "

// luaScript is handed to wrk with -s. init receives the pipeline depth after
// "--"; with a depth above 1 it defines request() to send that many
// requests back to back (wrk counts them and times the batch). done prints
// one JSON line; latency values are in microseconds.
//
// The percentiles work around a wrk 4.x bug: its coordinated-omission
// correction adds samples below the histogram's recorded minimum when
// pipelining (it spaces them by the per-request interval, while pipelined
// samples are per batch), and the percentile scan, which starts at that
// minimum, then never reaches the ranks above the visible share: wrk prints
// p90 and p99 as 0. visible() finds that share by bisection (percentile(q)
// is 0 exactly when q's rank lies beyond it) and the percentiles are taken
// over the visible samples. Without pipelining the share is 1 and the
// figures are wrk's own.
const luaScript = `-- written by veloq's bench/cmd/wrkload
init = function(args)
  local depth = tonumber(args[1]) or 1
  if depth > 1 then
    local batch = {}
    for i = 1, depth do batch[i] = wrk.format() end
    local req = table.concat(batch)
    request = function() return req end
  end
end

local function visible(latency)
  if latency:percentile(100) > 0 then return 1 end
  local lo, hi = 0, 100
  for _ = 1, 40 do
    local mid = (lo + hi) / 2
    if latency:percentile(mid) > 0 then lo = mid else hi = mid end
  end
  return lo / 100
end

done = function(summary, latency, requests)
  local e = summary.errors
  local f = visible(latency)
  local p = function(q) return latency:percentile(q * f) end
  local mean = 0
  if f > 0 then mean = latency.mean / f end
  io.write(string.format(
    '` + reportPrefix + `{"duration_us":%d,"requests":%d,"bytes":%d,' ..
    '"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' ..
    '"p50":%.1f,"p90":%.1f,"p99":%.1f,"p999":%.1f,"max":%.1f,"mean":%.1f,"visible":%.4f}\n',
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    p(50), p(90), p(99), p(99.9), latency.max, mean, f))
end
`

// report is what luaScript prints.
type report struct {
	DurationUS int64   `json:"duration_us"`
	Requests   int64   `json:"requests"`
	Bytes      int64   `json:"bytes"`
	Connect    int64   `json:"connect"`
	Read       int64   `json:"read"`
	Write      int64   `json:"write"`
	Status     int64   `json:"status"` // responses with status >= 400
	Timeout    int64   `json:"timeout"`
	P50        float64 `json:"p50"`
	P90        float64 `json:"p90"`
	P99        float64 `json:"p99"`
	P999       float64 `json:"p999"`
	Max        float64 `json:"max"`
	Mean       float64 `json:"mean"`
	Visible    float64 `json:"visible"` // share of wrk's latency samples its percentile scan can reach
}

func parseReport(stdout []byte) (*report, error) {
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), reportPrefix)
		if !ok {
			continue
		}
		var r report
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("wrk report %q: %w", line, err)
		}
		if r.DurationUS <= 0 {
			return nil, fmt.Errorf("wrk report %q: no duration", line)
		}
		return &r, nil
	}
	return nil, errors.New("wrk printed no report line (did it run the Lua script?)")
}

func (rep *report) load() *result.Load {
	window := float64(rep.DurationUS) / 1e6
	r := &result.Load{
		Tool: "wrk", WindowS: window,
		Requests: rep.Requests, RPS: float64(rep.Requests) / window, BytesRecv: rep.Bytes,
		DialErrors: rep.Connect,
		Errors:     rep.Connect + rep.Read + rep.Write + rep.Status + rep.Timeout,
		Latency: result.Latency{P50: rep.P50, P90: rep.P90, P99: rep.P99, P999: rep.P999,
			Max: rep.Max, Mean: rep.Mean},
	}
	if r.Errors > 0 {
		r.FirstError = fmt.Sprintf("wrk: %d connect, %d read, %d write, %d timeout errors, %d responses >= 400",
			rep.Connect, rep.Read, rep.Write, rep.Timeout, rep.Status)
	}
	return r
}

func printText(out io.Writer, r *result.Load) {
	fmt.Fprintf(out, "wrkload: %s, %d conns, pipeline %d, window %.2fs\n", r.Addr, r.Conns, r.Pipeline, r.WindowS)
	fmt.Fprintf(out, "  requests   %d (%.0f req/s), %d bytes read (%.0f per response)\n",
		r.Requests, r.RPS, r.BytesRecv, float64(r.BytesRecv)/max(1, float64(r.Requests)))
	fmt.Fprintf(out, "  latency    p50 %.1fµs  p90 %.1fµs  p99 %.1fµs  p99.9 %.1fµs  max %.1fµs  mean %.1fµs\n",
		r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.P999, r.Latency.Max, r.Latency.Mean)
	fmt.Fprintf(out, "  errors     %d %s\n", r.Errors, r.FirstError)
	if r.Churn {
		fmt.Fprintf(out, "  reconnects %d TCP connections accepted on this machine in the window (%.2f per request)\n",
			r.PassiveOpens, float64(r.PassiveOpens)/max(1, float64(r.Requests)))
	}
	fmt.Fprintf(out, "  wrk CPU    %.2fs (%.0f%% of one core)\n", r.ClientCPUS, 100*r.ClientCPUUtil)
	if r.ServerPID > 0 {
		fmt.Fprintf(out, "  server CPU %.2fs (%.0f%% of one core), %.0f req per server CPU-second, RSS %d KiB\n",
			r.ServerCPUS, 100*r.ServerCPUUtil, r.ReqPerServerCPUS, r.ServerRSSKiB)
	}
}
