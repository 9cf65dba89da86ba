package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/veloq/veloq/bench/internal/proc"
	"github.com/veloq/veloq/bench/internal/result"
)

type harness struct {
	settings Settings
	benchDir string
	rootDir  string
	binDir   string
	logDir   string
	nextPort int

	serverCPU, loadCPU string // "" = not pinned
	heavyCPU           string // servers' CPUs in the CPU-heavy scenario
	prlimit            bool   // prlimit(1) is there to raise the server's fd limit

	start      time.Time
	done, runs int
	// Progress estimate: seconds expected for the runs not yet done, and
	// the expected and actual seconds of those done (their ratio corrects
	// the rest).
	expectLeft, expectDone, actualDone float64
}

func (h *harness) progress(format string, args ...any) {
	if h.start.IsZero() {
		h.start = time.Now()
	}
	el := time.Since(h.start)
	stamp := clock(el)
	if h.runs > 0 && h.done < h.runs {
		stamp += " / ~" + clock(el+time.Duration(h.remaining()*float64(time.Second)))
	}
	fmt.Fprintf(os.Stderr, "[%s] %s\n", stamp, fmt.Sprintf(format, args...))
}

func clock(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%02d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// remaining estimates the seconds left: what the remaining runs are
// expected to take, scaled by how the finished ones compared with their
// expectation (start-up and teardown vary by machine).
func (h *harness) remaining() float64 {
	f := 1.0
	if h.expectDone > 0 {
		f = min(max(h.actualDone/h.expectDone, 0.5), 3)
	}
	return h.expectLeft * f
}

// expected is roughly how long one run of sc takes.
func (h *harness) expected(sc Scenario) float64 {
	s := h.settings
	switch {
	case sc.Kind == kindIdle:
		return 1.5 + 2*s.IdleSettleS + float64(s.IdleConns)/5000
	case sc.Tool == toolWrk:
		return float64(wholeSeconds(s.warmup)+wholeSeconds(s.duration)) + 0.8
	}
	return s.WarmupS + s.DurationS + 0.6
}

func wholeSeconds(d time.Duration) int { return int(math.Ceil(d.Seconds())) }

// setupPinning checks that taskset is there and the CPUs exist; without them
// the run goes on unpinned and the report says so.
func (h *harness) setupPinning(serverCPU, loadCPU, heavyCPU string) error {
	h.progress("benchrun: settings: %d repeat(s), warmup %v, window %v", h.settings.Repeats, h.settings.warmup, h.settings.duration)
	if _, err := exec.LookPath("prlimit"); err == nil {
		h.prlimit = true
	} else {
		h.progress("warning: prlimit not found: servers keep the default fd limit (idle scenario may fail)")
	}
	if heavyCPU == "" {
		heavyCPU = serverCPU
	}
	if serverCPU == "" && loadCPU == "" {
		return nil
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		h.progress("warning: taskset not found: server and load generator are NOT pinned")
		return nil
	}
	for _, c := range []string{serverCPU, loadCPU, heavyCPU} {
		if c == "" {
			continue
		}
		if err := exec.Command("taskset", "-c", c, "true").Run(); err != nil {
			return fmt.Errorf("cannot pin to CPU %q (taskset -c %s true: %w); pass -server-cpu/-load-cpu/-heavy-cpu, or empty to disable", c, c, err)
		}
	}
	h.serverCPU, h.loadCPU, h.heavyCPU = serverCPU, loadCPU, heavyCPU
	return nil
}

// cpuFor is the CPU list a server is pinned to in sc.
func (h *harness) cpuFor(sc Scenario) string {
	if sc.Mode == modeHeavy {
		return h.heavyCPU
	}
	return h.serverCPU
}

func (h *harness) build(ctx context.Context) error {
	if err := os.MkdirAll(h.binDir, 0o755); err != nil {
		return err
	}
	steps := []struct {
		dir  string
		args []string
	}{
		{h.rootDir, []string{"build", "-o", filepath.Join(h.binDir, "echo-server"), "./cmd/echo-server"}},
		{h.benchDir, []string{"build", "-o", h.binDir + "/", "./cmd/tcpload", "./cmd/wrkload",
			"./peers/stdecho", "./peers/netpollecho", "./peers/stdhttp", "./peers/hertzhttp",
			"./peers/gnetecho", "./peers/gnethttp", "./peers/nbioecho", "./peers/nbiohttp", "./peers/fasthttp"}},
	}
	for _, st := range steps {
		h.progress("build: (cd %s && go %s)", rel(h.benchDir, st.dir), strings.Join(st.args, " "))
		cmd := exec.CommandContext(ctx, "go", st.args...)
		cmd.Dir = st.dir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s in %s: %w\n%s", strings.Join(st.args, " "), st.dir, err, out)
		}
	}
	return nil
}

// pinned wraps argv with taskset when cpu is set.
func pinned(cpu string, argv []string) []string {
	if cpu == "" {
		return argv
	}
	return append([]string{"taskset", "-c", cpu}, argv...)
}

func (h *harness) port() (int, error) {
	for range 200 {
		p := h.nextPort
		h.nextPort++
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			ln.Close()
			return p, nil
		}
	}
	return 0, errors.New("no free port found")
}

// serverProc is a running server under test.
type serverProc struct {
	cmd    *exec.Cmd
	pid    int
	line   string // its first line of output
	addr   string
	exited chan struct{}
	err    error // from Wait, valid once exited is closed
	log    *os.File
}

var pidRE = regexp.MustCompile(`\bpid (\d+)\b`)

func (h *harness) startServer(ctx context.Context, srv Server, sc Scenario, logName string) (*serverProc, error) {
	p, err := h.port()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(p)
	dir := filepath.Join(h.logDir, logName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args, err := srv.Args(sc, addr, dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", srv.Name, err)
	}
	if !filepath.IsAbs(args[0]) {
		args[0] = filepath.Join(h.binDir, args[0])
	}
	argv := pinned(h.cpuFor(sc), args)
	if h.prlimit {
		// prlimit and taskset both exec the next program, so the process we
		// start is the server itself and its PID is the one to sample.
		n := strconv.Itoa(h.settings.NofileLimit)
		argv = append([]string{"prlimit", "--nofile=" + n + ":" + n}, argv...)
	}
	logf, err := os.Create(filepath.Join(h.logDir, logName+".server.log"))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "$ %s\n", strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = logf
	// The server dies with benchrun, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	sp := &serverProc{cmd: cmd, addr: addr, exited: make(chan struct{}), log: logf}
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for n := 0; sc.Scan(); n++ {
			if n == 0 {
				first <- sc.Text()
			}
			fmt.Fprintln(logf, sc.Text())
		}
		close(first)
		sp.err = cmd.Wait()
		close(sp.exited)
	}()
	fail := func(err error) (*serverProc, error) {
		sp.stop()
		return nil, fmt.Errorf("%s: %w (log: %s)", srv.Name, err, rel(h.benchDir, logf.Name()))
	}
	if srv.Quiet {
		sp.pid = cmd.Process.Pid
		sp.line = fmt.Sprintf("%s (pid %d)", filepath.Base(args[0]), sp.pid)
	} else {
		select {
		case line, ok := <-first:
			if !ok {
				<-sp.exited
				return fail(fmt.Errorf("exited before printing its first line: %v", sp.err))
			}
			sp.line = line
		case <-time.After(10 * time.Second):
			return fail(errors.New("no output 10 s after start"))
		case <-ctx.Done():
			return fail(ctx.Err())
		}
		m := pidRE.FindStringSubmatch(sp.line)
		if m == nil {
			return fail(fmt.Errorf("first line %q has no \"pid N\"", sp.line))
		}
		sp.pid, _ = strconv.Atoi(m[1])
		if sp.pid != cmd.Process.Pid {
			return fail(fmt.Errorf("server says pid %d but the started process is %d", sp.pid, cmd.Process.Pid))
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if !sp.alive() {
			return fail(fmt.Errorf("exited before accepting on %s: %v", addr, sp.err))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fail(fmt.Errorf("not accepting on %s: %w", addr, err))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return sp, nil
}

// stop ends the server with SIGTERM (SIGKILL after 5 s) and reports anything
// abnormal: an exit before it was asked to, a non-zero status, a kill.
func (sp *serverProc) stop() (note string) {
	defer sp.log.Close()
	select {
	case <-sp.exited:
		return fmt.Sprintf("server exited on its own: %v", sp.err)
	default:
	}
	sp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-sp.exited:
		return termNote(sp.err)
	case <-time.After(5 * time.Second):
		sp.cmd.Process.Kill()
		<-sp.exited
		return "server ignored SIGTERM for 5 s and was killed"
	}
}

// termNote reports how a server ended after benchrun sent it SIGTERM: ""
// for a clean exit, or for death by that very signal (the default action,
// which servers without a handler, like the C floor, take).
func termNote(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return ""
		}
	}
	if err != nil {
		return fmt.Sprintf("server exit after SIGTERM: %v", err)
	}
	return ""
}

func (sp *serverProc) alive() bool {
	select {
	case <-sp.exited:
		return false
	default:
		return true
	}
}

// Run is one (scenario, server, repeat).
type Run struct {
	Rep        int          `json:"rep"`
	Addr       string       `json:"addr"`
	ServerPID  int          `json:"server_pid"`
	ServerLine string       `json:"server_line"`
	Load       *result.Load `json:"load,omitempty"`
	Idle       *IdleRun     `json:"idle,omitempty"`
	Error      string       `json:"error,omitempty"`
	Notes      []string     `json:"notes,omitempty"`
	WallS      float64      `json:"wall_s"`
}

// IdleRun is the server's memory with idle connections held open.
type IdleRun struct {
	Client           result.Idle `json:"client"`
	RSSBeforeKiB     int64       `json:"rss_before_kib"`      // after start, before any connection
	RSSHeldKiB       int64       `json:"rss_held_kib"`        // with all connections open and idle
	RSSAfterCloseKiB int64       `json:"rss_after_close_kib"` // after the client closed them
	FDsBefore        int         `json:"fds_before"`
	FDsHeld          int         `json:"fds_held"`
	FDsAfterClose    int         `json:"fds_after_close"`
	KiBPerConn       float64     `json:"kib_per_conn"`
}

func (h *harness) runAll(ctx context.Context, rep *Report, plans []planned) error {
	nsc, nsrv := len(plans), 0
	for _, p := range plans {
		h.runs += len(p.servers) * h.settings.Repeats
		h.expectLeft += float64(len(p.servers)*h.settings.Repeats) * h.expected(p.sc)
		nsrv = max(nsrv, len(p.servers))
	}
	h.progress("benchrun: %d runs (%d scenarios, up to %d servers each, %d repeat(s)), about %s; server CPU %q (CPU-heavy: %q), load CPU %q",
		h.runs, nsc, nsrv, h.settings.Repeats, clock(time.Duration(h.expectLeft*float64(time.Second))), h.serverCPU, h.heavyCPU, h.loadCPU)
	for _, p := range plans {
		sc := p.sc
		sr := ScenarioResult{Name: sc.Name, Title: sc.Title, Desc: sc.Desc, Group: sc.Group, Kind: sc.Kind, Mode: sc.Mode,
			Tool: sc.Tool, Conns: sc.Conns, Size: sc.Size, Pipeline: sc.Pipeline, Churn: sc.Churn, Work: sc.Work,
			Headline: sc.Headline, ServerCPU: h.cpuFor(sc)}
		if sc.Kind == kindIdle {
			sr.Conns = h.settings.IdleConns
		}
		for _, srv := range p.servers {
			sr.Servers = append(sr.Servers, ServerResult{Server: srv.Name})
		}
		sr.Notes = serverNotes(sc, p.servers)
		for r := range h.settings.Repeats {
			// Rotate the order each repeat so no server always runs first.
			for i := range p.servers {
				k := (i + r) % len(p.servers)
				run := h.runOne(ctx, sc, p.servers[k], r)
				if err := ctx.Err(); err != nil {
					return err
				}
				sr.Servers[k].Runs = append(sr.Servers[k].Runs, run)
			}
		}
		sr.summarize()
		rep.Scenarios = append(rep.Scenarios, sr)
	}
	return nil
}

func (h *harness) runOne(ctx context.Context, sc Scenario, srv Server, r int) Run {
	h.done++
	t0 := time.Now()
	defer func() {
		e := h.expected(sc)
		h.expectLeft -= e
		h.expectDone += e
		h.actualDone += time.Since(t0).Seconds()
	}()
	tag := fmt.Sprintf("[%d/%d] %s rep %d/%d %s", h.done, h.runs, sc.Name, r+1, h.settings.Repeats, srv.Name)
	h.progress("%s ...", tag)
	logName := fmt.Sprintf("%s.%s.%d", sc.Name, srv.Name, r+1)
	run := Run{Rep: r + 1}
	sp, err := h.startServer(ctx, srv, sc, logName)
	if err != nil {
		run.Error = err.Error()
		h.progress("%s FAILED: %s", tag, run.Error)
		return run
	}
	run.Addr, run.ServerPID, run.ServerLine = sp.addr, sp.pid, sp.line
	if srv.Backend != "" && !strings.Contains(sp.line, "backend "+srv.Backend) {
		run.Notes = append(run.Notes, fmt.Sprintf("asked for backend %s, server says: %q", srv.Backend, sp.line))
	}
	switch sc.Kind {
	case kindLoad:
		run.Load, err = h.load(ctx, sc, sp, logName)
	case kindIdle:
		run.Idle, err = h.idle(ctx, sc, sp, logName)
	default:
		err = fmt.Errorf("unknown scenario kind %q", sc.Kind)
	}
	if err == nil && !sp.alive() {
		err = errors.New("server died during the run")
	}
	if note := sp.stop(); note != "" {
		run.Notes = append(run.Notes, note)
	}
	run.WallS = time.Since(t0).Seconds()
	if err != nil {
		run.Error = err.Error()
		h.progress("%s FAILED: %s", tag, run.Error)
		return run
	}
	switch {
	case run.Load != nil:
		l := run.Load
		h.progress("%s: %s req/s, p50 %s µs, p99 %s µs, server CPU %.0f%%, %s req/CPU-s, loadgen CPU %.0f%%, errors %d",
			tag, num(l.RPS), lat(l.Latency.P50), lat(l.Latency.P99), 100*l.ServerCPUUtil, num(l.ReqPerServerCPUS), 100*l.ClientCPUUtil, l.Errors)
	case run.Idle != nil:
		i := run.Idle
		h.progress("%s: %d/%d conns, RSS %.1f -> %.1f MiB (%.2f KiB/conn), after close %.1f MiB, errors %d",
			tag, i.Client.ConnsOK, i.Client.Conns, mib(i.RSSBeforeKiB), mib(i.RSSHeldKiB), i.KiBPerConn, mib(i.RSSAfterCloseKiB), i.Client.Errors)
	}
	for _, n := range run.Notes {
		h.progress("%s note: %s", tag, n)
	}
	return run
}

func (h *harness) loadCmd(ctx context.Context, argv []string, logName string) (*exec.Cmd, *os.File, error) {
	argv = append([]string{filepath.Join(h.binDir, argv[0])}, argv[1:]...)
	argv = pinned(h.loadCPU, argv)
	logf, err := os.Create(filepath.Join(h.logDir, logName+".load.log"))
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(logf, "$ %s\n", strings.Join(argv, " "))
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 5 * time.Second
	return cmd, logf, nil
}

func (h *harness) load(ctx context.Context, sc Scenario, sp *serverProc, logName string) (*result.Load, error) {
	ctx, cancel := context.WithTimeout(ctx, h.settings.warmup+h.settings.duration+90*time.Second)
	defer cancel()
	cmd, logf, err := h.loadCmd(ctx, sc.loadArgs(h.settings, sp.addr, sp.pid), logName)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, logf)
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("load generator: %w: %s (log: %s)", err, lastLine(logf.Name()), rel(h.benchDir, logf.Name()))
	}
	var l result.Load
	if err := json.Unmarshal(lastJSON(out.Bytes()), &l); err != nil {
		return nil, fmt.Errorf("load generator output: %w", err)
	}
	if l.ServerPID != sp.pid {
		return nil, fmt.Errorf("load generator sampled pid %d, server is %d", l.ServerPID, sp.pid)
	}
	return &l, nil
}

// idle measures the server's RSS before, while holding IdleConns idle
// connections (each has echoed one message), and after they are closed.
func (h *harness) idle(ctx context.Context, sc Scenario, sp *serverProc, logName string) (*IdleRun, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var ir IdleRun
	time.Sleep(300 * time.Millisecond) // let the runtime settle after start
	var err error
	if ir.RSSBeforeKiB, err = proc.RSSKiB(sp.pid); err != nil {
		return nil, err
	}
	ir.FDsBefore, _ = proc.FDCount(sp.pid)
	argv := []string{"tcpload", "-addr", sp.addr, "-idle", strconv.Itoa(h.settings.IdleConns),
		"-size", strconv.Itoa(sc.Size), "-hold", "2m", "-dial-parallel", "128", "-json"}
	cmd, logf, err := h.loadCmd(ctx, argv, logName)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			lines <- sc.Text()
		}
		close(lines)
	}()
	var last string
	ready := false
	for !ready {
		select {
		case l, ok := <-lines:
			if !ok {
				cmd.Wait()
				return nil, fmt.Errorf("load generator exited before it was ready: %s (log: %s)", lastLine(logf.Name()), rel(h.benchDir, logf.Name()))
			}
			ready = strings.HasPrefix(l, "tcpload: ready")
		case <-ctx.Done():
			cmd.Wait()
			return nil, fmt.Errorf("load generator not ready: %w", ctx.Err())
		}
	}
	time.Sleep(h.settings.idleSettle)
	ir.RSSHeldKiB, err = proc.RSSKiB(sp.pid)
	ir.FDsHeld, _ = proc.FDCount(sp.pid)
	cmd.Process.Signal(syscall.SIGINT)
	for l := range lines {
		last = l
	}
	if werr := cmd.Wait(); werr != nil {
		return nil, fmt.Errorf("load generator: %w: %s", werr, lastLine(logf.Name()))
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(last), &ir.Client); err != nil {
		return nil, fmt.Errorf("load generator output %q: %w", last, err)
	}
	time.Sleep(h.settings.idleSettle)
	ir.RSSAfterCloseKiB, _ = proc.RSSKiB(sp.pid)
	ir.FDsAfterClose, _ = proc.FDCount(sp.pid)
	if ir.Client.ConnsOK > 0 {
		ir.KiBPerConn = float64(ir.RSSHeldKiB-ir.RSSBeforeKiB) / float64(ir.Client.ConnsOK)
	}
	return &ir, nil
}

// lastJSON returns the last line of out that looks like a JSON object.
func lastJSON(out []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if l := bytes.TrimSpace(lines[i]); len(l) > 0 && l[0] == '{' {
			return l
		}
	}
	return out
}

func lastLine(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

func machineFacts(ctx context.Context, root string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), LoadAvgStart: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.CommandContext(ctx, "go", "version").Output(); err == nil {
		m.GoVersion = strings.TrimPrefix(strings.TrimSpace(string(out)), "go version ")
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.VeloqCommit = strings.TrimSpace(string(out))
	}
	// Results and the page benchrun itself writes do not make the build dirty.
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain", "--untracked-files=no",
		"--", ".", ":!bench/results", ":!BENCHMARKS.md").Output(); err == nil {
		m.VeloqDirty = len(bytes.TrimSpace(out)) > 0
	}
	m.ClockTicks = proc.ClockTicks()
	return m
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
