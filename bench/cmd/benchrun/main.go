// Command benchrun builds veloq's echo-server, the peer servers and the load
// generator, runs every scenario against every server in one run, and writes
// results/<tag>.json and results/<tag>.md.
//
// Each run starts a fresh server pinned to one CPU (taskset -c 0, one loop)
// and a load generator pinned to another (taskset -c 1). The load generator
// samples the server's utime+stime from /proc at the edges of the measured
// window (warmup excluded), so "requests per server CPU-second" counts only
// work done in the window. Every (scenario, server) pair is repeated and the
// median of each metric is reported; servers run interleaved within a repeat,
// in an order rotated each repeat, so background noise spreads over all.
//
//	go run ./cmd/benchrun -quick          # ~2 minutes, 1 repeat
//	go run ./cmd/benchrun                 # full: 3 repeats, more scenarios
//	go run ./cmd/benchrun -servers veloq-uring,stdlib -scenarios echo-64B-c64
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Settings are what one benchrun invocation uses for every run.
type Settings struct {
	Quick       bool    `json:"quick"`
	Repeats     int     `json:"repeats"`
	WarmupS     float64 `json:"warmup_s"`
	DurationS   float64 `json:"duration_s"`
	IdleConns   int     `json:"idle_conns"`
	IdleSettleS float64 `json:"idle_settle_s"`
	ServerCPU   string  `json:"server_cpu"` // taskset list for servers, "" when not pinned
	LoadCPU     string  `json:"load_cpu"`   // taskset list for the load generator
	NofileLimit int     `json:"nofile_limit"`

	warmup, duration, idleSettle time.Duration
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		s         Settings
		dir       = flag.String("dir", ".", "the bench module's directory (veloq's root is its parent)")
		out       = flag.String("out", "results", "directory for the results, relative to -dir")
		tag       = flag.String("tag", "latest", "results file name: <out>/<tag>.json and .md")
		noBuild   = flag.Bool("no-build", false, "use the binaries already in bin/")
		servers   = flag.String("servers", "", "comma-separated servers to run (default all): "+strings.Join(serverNames(), ","))
		scens     = flag.String("scenarios", "", "comma-separated scenarios to run (default all for the mode): "+strings.Join(scenarioNames(), ","))
		repeats   = flag.Int("repeats", 0, "repeats per (scenario, server); 0 = 3, or 1 with -quick")
		warmup    = flag.Duration("warmup", 0, "warmup per run; 0 = 2s, or 1s with -quick")
		duration  = flag.Duration("duration", 0, "measured window per run; 0 = 10s, or 4s with -quick")
		basePort  = flag.Int("port", 19200, "first TCP port to use on 127.0.0.1 (each run takes the next one)")
		serverCPU = flag.String("server-cpu", "0", "CPU list the servers are pinned to (taskset -c); empty = no pinning")
		loadCPU   = flag.String("load-cpu", "1", "CPU list the load generator is pinned to (taskset -c); empty = no pinning")
	)
	flag.BoolVar(&s.Quick, "quick", false, "short runs, 1 repeat, headline scenarios only")
	flag.IntVar(&s.IdleConns, "idle-conns", 10000, "connections in the idle scenario")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}

	s.Repeats, s.warmup, s.duration, s.idleSettle = 3, 2*time.Second, 10*time.Second, 2*time.Second
	if s.Quick {
		s.Repeats, s.warmup, s.duration, s.idleSettle = 1, time.Second, 4*time.Second, time.Second
	}
	if *repeats > 0 {
		s.Repeats = *repeats
	}
	if *warmup > 0 {
		s.warmup = *warmup
	}
	if *duration > 0 {
		s.duration = *duration
	}
	s.WarmupS, s.DurationS, s.IdleSettleS = s.warmup.Seconds(), s.duration.Seconds(), s.idleSettle.Seconds()
	// Servers get 65536 descriptors, or as many as the hard limit allows
	// (raising the hard limit needs CAP_SYS_RESOURCE, which containers often lack).
	s.NofileLimit = max(65536, s.IdleConns+1024)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Max < uint64(s.NofileLimit) {
		s.NofileLimit = int(lim.Max)
	}
	if s.IdleConns+64 > s.NofileLimit {
		return fmt.Errorf("-idle-conns %d needs more descriptors than the hard limit %d allows", s.IdleConns, s.NofileLimit)
	}

	benchDir, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	if b, err := os.ReadFile(filepath.Join(benchDir, "go.mod")); err != nil || !strings.Contains(string(b), "module github.com/veloq/veloq/bench") {
		return fmt.Errorf("%s is not the bench module (run from bench/, or pass -dir)", benchDir)
	}
	rootDir := filepath.Dir(benchDir)

	srvList, err := pickServers(*servers)
	if err != nil {
		return err
	}
	scList, err := pickScenarios(*scens, s.Quick)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	h := &harness{
		settings: s,
		benchDir: benchDir,
		rootDir:  rootDir,
		binDir:   filepath.Join(benchDir, "bin"),
		logDir:   filepath.Join(benchDir, *out, "tmp"),
		nextPort: *basePort,
	}
	if err := h.setupPinning(*serverCPU, *loadCPU); err != nil {
		return err
	}
	h.settings.ServerCPU, h.settings.LoadCPU = h.serverCPU, h.loadCPU
	if err := os.MkdirAll(h.logDir, 0o755); err != nil {
		return err
	}

	started := time.Now()
	if !*noBuild {
		if err := h.build(ctx); err != nil {
			return err
		}
	}
	report := &Report{
		Started:  started.UTC().Format(time.RFC3339),
		Machine:  machineFacts(ctx, rootDir),
		Settings: h.settings,
	}
	h.progress("machine: %s, %d CPUs, kernel %s, %s, load avg %s",
		report.Machine.CPUModel, report.Machine.CPUs, report.Machine.Kernel, report.Machine.GoVersion, report.Machine.LoadAvgStart)
	if runtime.NumCPU() < 2 {
		h.progress("warning: fewer than 2 CPUs: server and load generator share a CPU")
	}

	if err := h.runAll(ctx, report, scList, srvList); err != nil {
		return err
	}
	report.Machine.LoadAvgEnd = loadAvg()
	report.ElapsedS = time.Since(started).Seconds()

	outDir := filepath.Join(benchDir, *out)
	jsonPath, mdPath, err := report.write(outDir, *tag)
	if err != nil {
		return err
	}
	h.progress("done in %s: wrote %s and %s", time.Since(started).Round(time.Second), rel(benchDir, jsonPath), rel(benchDir, mdPath))
	fmt.Print(report.markdown())
	return nil
}

func rel(base, p string) string {
	if r, err := filepath.Rel(base, p); err == nil {
		return r
	}
	return p
}
