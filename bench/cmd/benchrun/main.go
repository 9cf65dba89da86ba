// Command benchrun builds veloq's echo-server, the peer servers and the load
// generators, runs every scenario against every server in one run, and
// writes results/<tag>.json and .md, one SVG chart per scenario group
// (results/<tag>-<group>.svg) and, after a full run, BENCHMARKS.md at the
// repository root.
//
// Each run starts a fresh server pinned to one CPU (taskset -c 0, one loop)
// and a load generator pinned to another (taskset -c 1): tcpload for TCP,
// wrkload (wrk) for HTTP. The load generator samples the server's
// utime+stime from /proc at the edges of the measured window (warmup
// excluded), so "requests per server CPU-second" counts only work done in
// the window. Every (scenario, server) pair is repeated and the median of
// each metric is reported; servers run interleaved within a repeat, in an
// order rotated each repeat, so background noise spreads over all.
//
// The C floor (c-epoll, c-uring: minimal C servers, see floor.go) is
// compiled with gcc from the -limits directory (default bench/floor, where
// its sources are vendored) at the start of a run, skipped with a message
// when it cannot be, and every TCP echo and HTTP figure is also given as a
// ratio of server CPU per request to it.
//
//	bench/run.sh --quick                  # ~2 minutes, 1 repeat, results/quick.*
//	bench/run.sh                          # full: 3 repeats, results/latest.*, BENCHMARKS.md
//	bench/run.sh -servers veloq-uring,stdlib -scenarios echo-64B-c64
//	bench/run.sh -render results/latest.json   # redo the tables, charts and page
//	bench/floor.sh 3 4                    # veloq against the C floor only
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Settings are what one benchrun invocation uses for every run.
type Settings struct {
	Quick       bool    `json:"quick"`
	Subset      bool    `json:"subset"` // -servers or -scenarios limited the run
	Repeats     int     `json:"repeats"`
	WarmupS     float64 `json:"warmup_s"`
	DurationS   float64 `json:"duration_s"`
	IdleConns   int     `json:"idle_conns"`
	IdleSettleS float64 `json:"idle_settle_s"`
	Work        int     `json:"work"`       // hashing rounds per message in the CPU-heavy scenario
	ServerCPU   string  `json:"server_cpu"` // taskset list for servers, "" when not pinned
	HeavyCPU    string  `json:"heavy_cpu"`  // taskset list for servers in the CPU-heavy scenario
	LoadCPU     string  `json:"load_cpu"`   // taskset list for the load generator
	NofileLimit int     `json:"nofile_limit"`
	LimitsDir   string  `json:"limits_dir,omitempty"` // -limits: where the C floor's sources were looked for

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
		tag       = flag.String("tag", "", "results file names: <out>/<tag>.json, .md and <tag>-<group>.svg (default latest, or quick with -quick)")
		doc       = flag.String("doc", "../BENCHMARKS.md", "page with the tables and charts, relative to -dir; written after a full run of the whole suite, or whenever this flag is given; empty = never")
		render    = flag.String("render", "", "run nothing: rewrite the markdown, charts and (with -doc) the page from this results JSON")
		noBuild   = flag.Bool("no-build", false, "use the binaries already in bin/")
		servers   = flag.String("servers", "", "comma-separated servers to run (default all): "+strings.Join(serverNames(), ","))
		scens     = flag.String("scenarios", "", "comma-separated scenarios to run (default all): "+strings.Join(scenarioNames(), ","))
		repeats   = flag.Int("repeats", 0, "repeats per (scenario, server); 0 = 3, or 1 with -quick")
		warmup    = flag.Duration("warmup", 0, "warmup per run; 0 = 2s, or 500ms with -quick (wrk rounds up to whole seconds)")
		duration  = flag.Duration("duration", 0, "measured window per run; 0 = 8s, or 2.5s with -quick (wrk rounds up to whole seconds)")
		basePort  = flag.Int("port", 19200, "first TCP port to use on 127.0.0.1 (each run takes the next one)")
		serverCPU = flag.String("server-cpu", "0", "CPU list the servers are pinned to (taskset -c); empty = no pinning")
		heavyCPU  = flag.String("heavy-cpu", "", "CPU list for the servers in the CPU-heavy scenario (default: -server-cpu); veloq's pool gets one worker per CPU")
		loadCPU   = flag.String("load-cpu", "1", "CPU list the load generator is pinned to (taskset -c); empty = no pinning")
		limits    = flag.String("limits", defaultLimits, "directory of the C floor's sources (epoll_echo.c, uring_echo.c, epoll_http.c), relative to veloq's root unless absolute; compiled with gcc into bin/, the floor servers are skipped when it is missing (default: the copies vendored in bench/floor)")
		printWhat = flag.String("print", "tables", "what to print on stdout at the end: tables (every scenario) or floor (server CPU per request against the C floor only)")
	)
	flag.BoolVar(&s.Quick, "quick", false, "about 2 minutes: 1 repeat, short windows, fewer servers in the secondary scenarios")
	flag.IntVar(&s.IdleConns, "idle-conns", 10000, "connections in the idle scenario")
	flag.IntVar(&s.Work, "work", 200, "rounds of FNV-1a hashing per 64-byte message in the CPU-heavy scenario")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	docGiven := false
	flag.Visit(func(f *flag.Flag) { docGiven = docGiven || f.Name == "doc" })

	benchDir, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	if b, err := os.ReadFile(filepath.Join(benchDir, "go.mod")); err != nil || !strings.Contains(string(b), "module github.com/veloq/veloq/bench") {
		return fmt.Errorf("%s is not the bench module (run from bench/, or pass -dir)", benchDir)
	}
	rootDir := filepath.Dir(benchDir)
	docPath := ""
	if *doc != "" {
		docPath = filepath.Join(benchDir, *doc)
	}
	if *render != "" {
		return renderOnly(benchDir, *render, docPath, docGiven)
	}
	if *printWhat != "tables" && *printWhat != "floor" {
		return fmt.Errorf("-print %q: want tables or floor", *printWhat)
	}
	limitsDir := *limits
	if !filepath.IsAbs(limitsDir) {
		limitsDir = filepath.Join(rootDir, limitsDir)
	}
	s.LimitsDir = *limits

	s.Repeats, s.warmup, s.duration, s.idleSettle = 3, 2*time.Second, 8*time.Second, 2*time.Second
	if s.Quick {
		s.Repeats, s.warmup, s.duration, s.idleSettle = 1, 500*time.Millisecond, 2500*time.Millisecond, 700*time.Millisecond
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
	if *tag == "" {
		*tag = "latest"
		if s.Quick {
			*tag = "quick"
		}
	}
	if s.Work < 1 {
		return fmt.Errorf("-work %d: want at least 1", s.Work)
	}
	s.WarmupS, s.DurationS, s.IdleSettleS = s.warmup.Seconds(), s.duration.Seconds(), s.idleSettle.Seconds()
	s.Subset = *servers != "" || *scens != ""
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

	srvList, err := pickServers(*servers)
	if err != nil {
		return err
	}
	scList, err := pickScenarios(*scens)
	if err != nil {
		return err
	}
	for i := range scList {
		if scList[i].Mode == modeHeavy {
			scList[i].Work = s.Work
		}
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
	if err := h.setupPinning(*serverCPU, *loadCPU, *heavyCPU); err != nil {
		return err
	}
	h.settings.ServerCPU, h.settings.LoadCPU, h.settings.HeavyCPU = h.serverCPU, h.loadCPU, h.heavyCPU
	// The logs of the previous run go: tmp/ holds this run's only.
	if err := os.RemoveAll(h.logDir); err != nil {
		return err
	}
	if err := os.MkdirAll(h.logDir, 0o755); err != nil {
		return err
	}

	srvList = withFloor(srvList, limitsDir, h.binDir, !*noBuild)
	plans, skipped := plan(scList, srvList, s.Quick, *servers != "", toolMissing)
	for _, sk := range skipped {
		h.progress("%s", sk)
	}
	if len(plans) == 0 {
		return errors.New("nothing to run")
	}

	started := time.Now()
	if !*noBuild {
		if err := h.build(ctx); err != nil {
			return err
		}
		var notes []string
		plans, notes = buildFloor(ctx, plans, limitsDir, h.binDir, h.progress)
		for _, n := range notes {
			h.progress("%s", n)
		}
		skipped = append(skipped, notes...)
		if len(plans) == 0 {
			return errors.New("nothing to run")
		}
	}
	report := &Report{
		Started:  started.UTC().Format(time.RFC3339),
		Command:  commandLine(),
		Machine:  machineFacts(ctx, rootDir),
		Settings: h.settings,
		Skipped:  skipped,
	}
	for _, srv := range allServers {
		if slices.ContainsFunc(plans, func(p planned) bool {
			return slices.ContainsFunc(p.servers, func(x Server) bool { return x.Name == srv.Name })
		}) {
			report.Servers = append(report.Servers, ServerInfo{Name: srv.Name, What: srv.What})
		}
	}
	h.progress("machine: %s, %d CPUs, kernel %s, %s, load avg %s",
		report.Machine.CPUModel, report.Machine.CPUs, report.Machine.Kernel, report.Machine.GoVersion, report.Machine.LoadAvgStart)
	if runtime.NumCPU() < 2 {
		h.progress("warning: fewer than 2 CPUs: server and load generator share a CPU")
	}

	if err := h.runAll(ctx, report, plans); err != nil {
		if ctx.Err() != nil {
			return errors.New("interrupted: every server and load generator it started has been stopped; no results written")
		}
		return err
	}
	report.Machine.LoadAvgEnd = loadAvg()
	report.ElapsedS = time.Since(started).Seconds()

	writeDoc := docPath != "" && (docGiven || (!s.Quick && !s.Subset))
	if !writeDoc {
		docPath = ""
	}
	written, err := report.writeAll(filepath.Join(benchDir, *out), *tag, docPath, true)
	if err != nil {
		return err
	}
	h.progress("done in %s: wrote %s", time.Since(started).Round(time.Second), strings.Join(relAll(benchDir, written), ", "))
	if *printWhat == "floor" {
		fmt.Print(report.floorTable())
	} else {
		fmt.Print(report.markdown())
	}
	return nil
}

// toolMissing says why a load generator cannot run here ("" = it can).
func toolMissing(tool string) string {
	if tool == toolWrk {
		if _, err := exec.LookPath("wrk"); err != nil {
			return "wrk is not installed: apt-get install wrk"
		}
	}
	return ""
}

// commandLine is how this run was started, as run.sh passes it in
// BENCH_CMD (or the binary's own path), with the flags.
func commandLine() string {
	c := os.Getenv("BENCH_CMD")
	if c == "" {
		c = os.Args[0]
	}
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " \t'\"$`") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		c += " " + a
	}
	return c
}

// renderOnly rewrites the outputs of an earlier run from its JSON.
func renderOnly(benchDir, jsonPath, docPath string, docGiven bool) error {
	if !filepath.IsAbs(jsonPath) {
		jsonPath = filepath.Join(benchDir, jsonPath)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		return err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", jsonPath, err)
	}
	if !docGiven && (r.Settings.Quick || r.Settings.Subset) {
		docPath = ""
	}
	tag := strings.TrimSuffix(filepath.Base(jsonPath), ".json")
	written, err := r.writeAll(filepath.Dir(jsonPath), tag, docPath, false)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "benchrun: wrote %s\n", strings.Join(relAll(benchDir, written), ", "))
	return nil
}

func relAll(base string, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = rel(base, p)
	}
	return out
}

func rel(base, p string) string {
	if r, err := filepath.Rel(base, p); err == nil {
		return r
	}
	return p
}
