package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Report is everything one benchrun writes.
type Report struct {
	Started  string   `json:"started"`
	ElapsedS float64  `json:"elapsed_s"`
	Command  string   `json:"command"` // how this run was started, from the repository root
	Machine  Machine  `json:"machine"`
	Settings Settings `json:"settings"`
	// Servers describes every server that ran, in the order declared.
	Servers   []ServerInfo     `json:"servers"`
	Skipped   []string         `json:"skipped,omitempty"` // scenarios and servers left out, and why
	Scenarios []ScenarioResult `json:"scenarios"`
}

// ServerInfo says what a server name in the tables stands for.
type ServerInfo struct {
	Name string `json:"name"`
	What string `json:"what"`
}

// Machine records where the numbers came from.
type Machine struct {
	CPUModel     string `json:"cpu_model"`
	CPUs         int    `json:"cpus"`
	Kernel       string `json:"kernel"`
	GoVersion    string `json:"go_version"`
	VeloqCommit  string `json:"veloq_commit"`
	VeloqDirty   bool   `json:"veloq_dirty"` // the work tree had uncommitted changes to tracked files
	ClockTicks   int64  `json:"clk_tck"`
	LoadAvgStart string `json:"loadavg_start"`
	LoadAvgEnd   string `json:"loadavg_end"`
}

type ScenarioResult struct {
	Name      string         `json:"name"`
	Title     string         `json:"title"`
	Desc      string         `json:"desc,omitempty"`
	Group     string         `json:"group"`
	Kind      string         `json:"kind"`
	Mode      string         `json:"mode"`
	Tool      string         `json:"tool,omitempty"`
	Conns     int            `json:"conns"`
	Size      int            `json:"size"`
	Pipeline  int            `json:"pipeline,omitempty"`
	Churn     bool           `json:"churn,omitempty"`
	Work      int            `json:"work,omitempty"`
	Headline  bool           `json:"headline,omitempty"`
	ServerCPU string         `json:"server_cpu"` // the CPUs the servers were pinned to
	Servers   []ServerResult `json:"servers"`
	// Notes are the servers' caveats for this scenario's mode, printed
	// under its table.
	Notes []string `json:"notes,omitempty"`
}

type ServerResult struct {
	Server   string       `json:"server"`
	Runs     []Run        `json:"runs"`
	OK       int          `json:"ok_runs"`
	Load     *LoadSummary `json:"load_median,omitempty"`
	Idle     *IdleSummary `json:"idle_median,omitempty"`
	Baseline *Ratios      `json:"vs_stdlib,omitempty"`
	Floor    *FloorRatio  `json:"vs_floor,omitempty"`
}

// FloorRatio sets a server's CPU per request against the C floor's in the
// same scenario of the same run.
type FloorRatio struct {
	Floor string `json:"floor"` // the floor server compared with
	// CPU is the server's CPU per request ÷ the floor's, i.e. the floor's
	// req per server CPU-second ÷ the server's: ≥1 = more CPU than the floor.
	CPU float64 `json:"cpu_per_req"`
}

// LoadSummary holds the median of each metric over the successful runs,
// each taken on its own (so the p99 is the median p99, not the p99 of the
// run with the median req/s). Errors is the sum over all runs.
type LoadSummary struct {
	RPS              float64 `json:"rps"`
	P50              float64 `json:"p50_us"`
	P90              float64 `json:"p90_us"`
	P99              float64 `json:"p99_us"`
	P999             float64 `json:"p999_us"`
	Max              float64 `json:"max_us"`
	ServerCPUUtil    float64 `json:"server_cpu_util"`
	ReqPerServerCPUS float64 `json:"req_per_server_cpu_s"`
	ClientCPUUtil    float64 `json:"client_cpu_util"`
	ServerRSSKiB     float64 `json:"server_rss_kib"`
	RespBytes        float64 `json:"resp_bytes,omitempty"` // HTTP: bytes per response, headers included
	Errors           int64   `json:"errors"`
}

type IdleSummary struct {
	ConnsOK          float64 `json:"conns_ok"`
	RSSBeforeKiB     float64 `json:"rss_before_kib"`
	RSSHeldKiB       float64 `json:"rss_held_kib"`
	RSSAfterCloseKiB float64 `json:"rss_after_close_kib"`
	KiBPerConn       float64 `json:"kib_per_conn"`
	FDsHeld          float64 `json:"fds_held"`
	FDsAfterClose    float64 `json:"fds_after_close"`
	Errors           int64   `json:"errors"`
}

// Ratios compare a server's medians with the baseline's (>1 = better than
// stdlib for RPS and ReqPerCPU; <1 = better for KiBPerConn).
type Ratios struct {
	RPS        float64 `json:"rps,omitempty"`
	ReqPerCPU  float64 `json:"req_per_server_cpu_s,omitempty"`
	KiBPerConn float64 `json:"kib_per_conn,omitempty"`
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// med returns the median of f over the given items.
func med[T any](items []T, f func(T) float64) float64 {
	xs := make([]float64, len(items))
	for i, it := range items {
		xs[i] = f(it)
	}
	return median(xs)
}

func (sr *ScenarioResult) summarize() {
	for i := range sr.Servers {
		s := &sr.Servers[i]
		var loads []Run
		var errs int64
		for _, r := range s.Runs {
			switch {
			case r.Error != "":
			case r.Load != nil:
				loads = append(loads, r)
				errs += r.Load.Errors
			case r.Idle != nil:
				loads = append(loads, r)
				errs += r.Idle.Client.Errors
			}
		}
		s.OK = len(loads)
		if len(loads) == 0 {
			continue
		}
		if loads[0].Load != nil {
			l := func(f func(Run) float64) float64 { return med(loads, f) }
			s.Load = &LoadSummary{
				RPS:              l(func(r Run) float64 { return r.Load.RPS }),
				P50:              l(func(r Run) float64 { return r.Load.Latency.P50 }),
				P90:              l(func(r Run) float64 { return r.Load.Latency.P90 }),
				P99:              l(func(r Run) float64 { return r.Load.Latency.P99 }),
				P999:             l(func(r Run) float64 { return r.Load.Latency.P999 }),
				Max:              l(func(r Run) float64 { return r.Load.Latency.Max }),
				ServerCPUUtil:    l(func(r Run) float64 { return r.Load.ServerCPUUtil }),
				ReqPerServerCPUS: l(func(r Run) float64 { return r.Load.ReqPerServerCPUS }),
				ClientCPUUtil:    l(func(r Run) float64 { return r.Load.ClientCPUUtil }),
				ServerRSSKiB:     l(func(r Run) float64 { return float64(r.Load.ServerRSSKiB) }),
				Errors:           errs,
			}
			if loads[0].Load.Tool == "wrk" {
				s.Load.RespBytes = l(func(r Run) float64 { return float64(r.Load.BytesRecv) / max(1, float64(r.Load.Requests)) })
			}
		} else {
			s.Idle = &IdleSummary{
				ConnsOK:          med(loads, func(r Run) float64 { return float64(r.Idle.Client.ConnsOK) }),
				RSSBeforeKiB:     med(loads, func(r Run) float64 { return float64(r.Idle.RSSBeforeKiB) }),
				RSSHeldKiB:       med(loads, func(r Run) float64 { return float64(r.Idle.RSSHeldKiB) }),
				RSSAfterCloseKiB: med(loads, func(r Run) float64 { return float64(r.Idle.RSSAfterCloseKiB) }),
				KiBPerConn:       med(loads, func(r Run) float64 { return r.Idle.KiBPerConn }),
				FDsHeld:          med(loads, func(r Run) float64 { return float64(r.Idle.FDsHeld) }),
				FDsAfterClose:    med(loads, func(r Run) float64 { return float64(r.Idle.FDsAfterClose) }),
				Errors:           errs,
			}
		}
	}
	sr.floorRatios()
	var base *ServerResult
	for i := range sr.Servers {
		if sr.Servers[i].Server == baseline {
			base = &sr.Servers[i]
		}
	}
	if base == nil {
		return
	}
	for i := range sr.Servers {
		s := &sr.Servers[i]
		switch {
		case s.Load != nil && base.Load != nil:
			s.Baseline = &Ratios{RPS: safeDiv(s.Load.RPS, base.Load.RPS), ReqPerCPU: safeDiv(s.Load.ReqPerServerCPUS, base.Load.ReqPerServerCPUS)}
		case s.Idle != nil && base.Idle != nil:
			s.Baseline = &Ratios{KiBPerConn: safeDiv(s.Idle.KiBPerConn, base.Idle.KiBPerConn)}
		}
	}
}

// floorOf names the floor a server is set against in a scenario of the
// given mode: veloq's io_uring backend (and the io_uring floor itself)
// against the io_uring floor where there is one (TCP echo), every other
// server against the epoll floor (for HTTP, the epoll HTTP server).
func floorOf(server, mode string) string {
	if (server == "veloq-uring" || server == floorURing) && mode == modeEcho {
		return floorURing
	}
	return floorEpoll
}

// floorRatios sets each server's Floor when its floor has a result in this
// scenario.
func (sr *ScenarioResult) floorRatios() {
	for i := range sr.Servers {
		s := &sr.Servers[i]
		s.Floor = nil
		f := sr.find(floorOf(s.Server, sr.Mode))
		if s.Load == nil || f == nil || f.Load == nil {
			continue
		}
		if x := safeDiv(f.Load.ReqPerServerCPUS, s.Load.ReqPerServerCPUS); x > 0 {
			s.Floor = &FloorRatio{Floor: f.Server, CPU: x}
		}
	}
}

// hasFloor says whether any server in the scenario was set against a floor.
func (sc ScenarioResult) hasFloor() bool {
	return slices.ContainsFunc(sc.Servers, func(sv ServerResult) bool { return sv.Floor != nil })
}

// floorNote says which floor each server in sc is set against.
func (sc ScenarioResult) floorNote() string {
	var uring, epoll []string
	for _, sv := range sc.Servers {
		if sv.Floor == nil || sv.Server == sv.Floor.Floor {
			continue
		}
		if sv.Floor.Floor == floorURing {
			uring = append(uring, sv.Server)
		} else {
			epoll = append(epoll, sv.Server)
		}
	}
	s := "`vs floor`: server CPU per request ÷ the C floor's in this run (≥1: more CPU than the floor)"
	switch {
	case len(uring) > 0 && len(epoll) > 0:
		s += fmt.Sprintf("; %s against %s, the others against %s", strings.Join(uring, " and "), floorURing, floorEpoll)
	case len(uring) > 0:
		s += "; against " + floorURing
	case len(epoll) > 0:
		s += "; against " + floorEpoll
	}
	return s + "."
}

// µsPerReq is server CPU per request in microseconds.
func µsPerReq(reqPerCPUS float64) string {
	if reqPerCPUS <= 0 || math.IsNaN(reqPerCPUS) {
		return "-"
	}
	return fmt.Sprintf("%.2f", 1e6/reqPerCPUS)
}

// floorTable is every load scenario with a floor, one row per server:
// req/s, server CPU per request and the ratio to its floor; "" when no
// floor ran. floor.sh prints it.
func (r *Report) floorTable() string {
	var b strings.Builder
	for _, sc := range r.Scenarios {
		if sc.Kind != kindLoad || !sc.hasFloor() {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("Server CPU per request against the C floor in the same run: veloq-uring against c-uring (TCP echo), every other server against c-epoll (for HTTP, its HTTP server); ≥1 = more CPU per request than the floor.\n\n")
			b.WriteString("| scenario | server | req/s | server CPU µs per req | floor | vs floor |\n")
			b.WriteString("|---|---|--:|--:|---|--:|\n")
		}
		for _, sv := range sc.Servers {
			if sv.Load == nil {
				fmt.Fprintf(&b, "| `%s` | %s | failed | | | |\n", sc.Name, sv.Server)
				continue
			}
			floor, x := "-", "-"
			if sv.Floor != nil {
				floor, x = sv.Floor.Floor, ratio(sv.Floor.CPU)
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", sc.Name, sv.Server, num(sv.Load.RPS), µsPerReq(sv.Load.ReqPerServerCPUS), floor, x)
		}
	}
	return b.String()
}

// safeDiv is a/b, or 0 when that is not a number.
func safeDiv(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return 0
	}
	return a / b
}

// num formats a count with thousands separators.
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// lat formats microseconds: one decimal below 100 µs, whole numbers above.
func lat(us float64) string {
	if us < 100 {
		return fmt.Sprintf("%.1f", us)
	}
	return num(us)
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

func ratio(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", x)
}

func pct(x float64) string { return fmt.Sprintf("%.0f%%", 100*x) }

// markdown is results/<tag>.md: the header, then every scenario's table.
func (r *Report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# veloq bench results (%s run, %s)\n\n", r.runKind(), r.Started)
	b.WriteString(r.factsMarkdown())
	for _, sc := range r.Scenarios {
		b.WriteString("\n")
		b.WriteString(sc.markdown("##"))
	}
	if t := r.floorTable(); t != "" {
		b.WriteString("\n## Against the C floor\n\n")
		b.WriteString(t)
	}
	if t := r.backendsMarkdown(); t != "" {
		b.WriteString("\n## io_uring vs epoll\n\n")
		b.WriteString(t)
	}
	return b.String()
}

func (r *Report) runKind() string {
	if r.Settings.Quick {
		return "quick"
	}
	return "full"
}

// factsMarkdown lists the command, machine, method and what was skipped.
func (r *Report) factsMarkdown() string {
	var b strings.Builder
	m, s := r.Machine, r.Settings
	dirty := ""
	if m.VeloqDirty {
		dirty = " (work tree had uncommitted changes)"
	}
	if r.Command != "" {
		fmt.Fprintf(&b, "- command: `%s`\n", r.Command)
	}
	fmt.Fprintf(&b, "- machine: %s, %d CPUs, kernel %s, %s\n", m.CPUModel, m.CPUs, m.Kernel, m.GoVersion)
	fmt.Fprintf(&b, "- veloq commit: %s%s\n", m.VeloqCommit, dirty)
	fmt.Fprintf(&b, "- load average: %s at start, %s at end\n", m.LoadAvgStart, m.LoadAvgEnd)
	pin := fmt.Sprintf("server pinned to CPU %s, load generator to CPU %s", s.ServerCPU, s.LoadCPU)
	if s.ServerCPU == "" || s.LoadCPU == "" {
		pin = fmt.Sprintf("pinning: server CPU %q, load generator CPU %q (empty = not pinned)", s.ServerCPU, s.LoadCPU)
	}
	fmt.Fprintf(&b, "- method: %s; one server loop; warmup %gs then a %gs measured window (wrk: whole seconds); median of %d repeat(s); server CPU = Δ(utime+stime) over the window (CLK_TCK %d)\n",
		pin, s.WarmupS, s.DurationS, s.Repeats, m.ClockTicks)
	fmt.Fprintf(&b, "- took %s\n", clock(time.Duration(r.ElapsedS*float64(time.Second))))
	for _, sk := range r.Skipped {
		fmt.Fprintf(&b, "- %s\n", sk)
	}
	if len(r.Servers) > 0 {
		b.WriteString("- servers:\n")
		for _, sv := range r.Servers {
			fmt.Fprintf(&b, "  - `%s`: %s\n", sv.Name, sv.What)
		}
	}
	return b.String()
}

// markdown is the scenario's heading (at level h), description and table.
func (sc ScenarioResult) markdown(h string) string {
	var b strings.Builder
	head := ""
	if sc.Headline {
		head = " — headline"
	}
	var notes []string
	switch sc.Kind {
	case kindLoad:
		fmt.Fprintf(&b, "%s %s%s\n\n", h, sc.Title, head)
		fmt.Fprintf(&b, "`%s`: %s.", sc.Name, sc.Desc)
		if sc.Work > 0 {
			fmt.Fprintf(&b, " N = %d.", sc.Work)
		}
		fmt.Fprintf(&b, " Servers on CPU %s.", orNone(sc.ServerCPU))
		floor := sc.hasFloor()
		if floor {
			b.WriteString(" " + sc.floorNote())
		}
		b.WriteString("\n\n")
		wrk := sc.Tool == toolWrk
		b.WriteString("| server | req/s | vs stdlib | p50 µs | p90 µs | p99 µs | p99.9 µs | server CPU | req per server CPU-s | vs stdlib |")
		if floor {
			b.WriteString(" vs floor |")
		}
		b.WriteString(" loadgen CPU |")
		if wrk {
			b.WriteString(" resp B |")
		}
		b.WriteString(" errors |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
		if floor {
			b.WriteString("--:|")
		}
		if wrk {
			b.WriteString("--:|")
		}
		b.WriteString("--:|\n")
		for _, sv := range sc.Servers {
			l := sv.Load
			if l == nil {
				fmt.Fprintf(&b, "| %s | failed |%s\n", sv.Server, strings.Repeat(" |", 10+btoi(wrk)+btoi(floor)))
			} else {
				rr := sv.ratios()
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |",
					sv.Server, num(l.RPS), ratio(rr.RPS), lat(l.P50), lat(l.P90), lat(l.P99), lat(l.P999),
					pct(l.ServerCPUUtil), num(l.ReqPerServerCPUS), ratio(rr.ReqPerCPU))
				if floor {
					x := 0.0
					if sv.Floor != nil {
						x = sv.Floor.CPU
					}
					fmt.Fprintf(&b, " %s |", ratio(x))
				}
				fmt.Fprintf(&b, " %s |", pct(l.ClientCPUUtil))
				if wrk {
					fmt.Fprintf(&b, " %.0f |", l.RespBytes)
				}
				fmt.Fprintf(&b, " %d |\n", l.Errors)
			}
			notes = append(notes, runNotes(sv)...)
		}
	case kindIdle:
		fmt.Fprintf(&b, "%s %s: %s\n\n", h, sc.Title, num(float64(sc.Conns)))
		fmt.Fprintf(&b, "`%s`: %d connections opened, one %d B echo each, then held idle; server VmRSS before, while held, and after close.\n\n", sc.Name, sc.Conns, sc.Size)
		b.WriteString("| server | conns held | RSS before MiB | RSS held MiB | KiB per idle conn | vs stdlib | RSS after close MiB | fds held | fds after close | errors |\n")
		b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, sv := range sc.Servers {
			i := sv.Idle
			if i == nil {
				fmt.Fprintf(&b, "| %s | failed | | | | | | | | |\n", sv.Server)
			} else {
				fmt.Fprintf(&b, "| %s | %s | %.1f | %.1f | %.2f | %s | %.1f | %s | %s | %d |\n",
					sv.Server, num(i.ConnsOK), i.RSSBeforeKiB/1024, i.RSSHeldKiB/1024, i.KiBPerConn, ratio(sv.ratios().KiBPerConn),
					i.RSSAfterCloseKiB/1024, num(i.FDsHeld), num(i.FDsAfterClose), i.Errors)
			}
			notes = append(notes, runNotes(sv)...)
		}
	}
	notes = append(slices.Clone(sc.Notes), notes...)
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

func (sv ServerResult) ratios() Ratios {
	if sv.Baseline == nil {
		return Ratios{}
	}
	return *sv.Baseline
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func orNone(s string) string {
	if s == "" {
		return "(not pinned)"
	}
	return s
}

// find returns the named server's result in sc, or nil.
func (sc ScenarioResult) find(name string) *ServerResult {
	for i := range sc.Servers {
		if sc.Servers[i].Server == name {
			return &sc.Servers[i]
		}
	}
	return nil
}

// backendsMarkdown compares veloq-uring with veloq-epoll in every load
// scenario where both ran; "" when there is none.
func (r *Report) backendsMarkdown() string {
	var b strings.Builder
	for _, sc := range r.Scenarios {
		u, e := sc.find("veloq-uring"), sc.find("veloq-epoll")
		if sc.Kind != kindLoad || u == nil || e == nil || u.Load == nil || e.Load == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("veloq-uring ÷ veloq-epoll, same server code on the two backends (>1: io_uring ahead).\n\n")
			b.WriteString("| scenario | uring req/s | epoll req/s | req/s ratio | uring req per CPU-s | epoll req per CPU-s | per-CPU ratio |\n")
			b.WriteString("|---|--:|--:|--:|--:|--:|--:|\n")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s |\n", sc.Name,
			num(u.Load.RPS), num(e.Load.RPS), ratio(safeDiv(u.Load.RPS, e.Load.RPS)),
			num(u.Load.ReqPerServerCPUS), num(e.Load.ReqPerServerCPUS), ratio(safeDiv(u.Load.ReqPerServerCPUS, e.Load.ReqPerServerCPUS)))
	}
	return b.String()
}

// runNotes lists failures, notes and first errors of a server's runs.
func runNotes(sv ServerResult) []string {
	var out []string
	for _, r := range sv.Runs {
		if r.Error != "" {
			out = append(out, fmt.Sprintf("%s rep %d failed: %s", sv.Server, r.Rep, r.Error))
		}
		for _, n := range r.Notes {
			out = append(out, fmt.Sprintf("%s rep %d: %s", sv.Server, r.Rep, n))
		}
		if r.Load != nil && r.Load.FirstError != "" {
			out = append(out, fmt.Sprintf("%s rep %d: %d error(s), first: %s", sv.Server, r.Rep, r.Load.Errors, r.Load.FirstError))
		}
		if r.Idle != nil && r.Idle.Client.FirstError != "" {
			out = append(out, fmt.Sprintf("%s rep %d: %d error(s), first: %s", sv.Server, r.Rep, r.Idle.Client.Errors, r.Idle.Client.FirstError))
		}
	}
	return out
}
