package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Report is everything one benchrun writes.
type Report struct {
	Started   string           `json:"started"`
	ElapsedS  float64          `json:"elapsed_s"`
	Machine   Machine          `json:"machine"`
	Settings  Settings         `json:"settings"`
	Scenarios []ScenarioResult `json:"scenarios"`
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
	Name     string         `json:"name"`
	Title    string         `json:"title"`
	Kind     string         `json:"kind"`
	Mode     string         `json:"mode"`
	Conns    int            `json:"conns"`
	Size     int            `json:"size"`
	Pipeline int            `json:"pipeline,omitempty"`
	Headline bool           `json:"headline,omitempty"`
	Servers  []ServerResult `json:"servers"`
}

type ServerResult struct {
	Server   string       `json:"server"`
	Runs     []Run        `json:"runs"`
	OK       int          `json:"ok_runs"`
	Load     *LoadSummary `json:"load_median,omitempty"`
	Idle     *IdleSummary `json:"idle_median,omitempty"`
	Baseline *Ratios      `json:"vs_stdlib,omitempty"`
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
	var base *ServerResult
	for i := range sr.Servers {
		if sr.Servers[i].Server == baseline {
			base = &sr.Servers[i]
		}
	}
	if base == nil {
		return
	}
	div := func(a, b float64) float64 {
		if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
			return 0
		}
		return a / b
	}
	for i := range sr.Servers {
		s := &sr.Servers[i]
		switch {
		case s.Load != nil && base.Load != nil:
			s.Baseline = &Ratios{RPS: div(s.Load.RPS, base.Load.RPS), ReqPerCPU: div(s.Load.ReqPerServerCPUS, base.Load.ReqPerServerCPUS)}
		case s.Idle != nil && base.Idle != nil:
			s.Baseline = &Ratios{KiBPerConn: div(s.Idle.KiBPerConn, base.Idle.KiBPerConn)}
		}
	}
}

func (r *Report) write(dir, tag string) (jsonPath, mdPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", "", err
	}
	jsonPath = filepath.Join(dir, tag+".json")
	mdPath = filepath.Join(dir, tag+".md")
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
		return "", "", err
	}
	return jsonPath, mdPath, os.WriteFile(mdPath, []byte(r.markdown()), 0o644)
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

func (r *Report) markdown() string {
	var b strings.Builder
	m, s := r.Machine, r.Settings
	mode := "full"
	if s.Quick {
		mode = "quick"
	}
	fmt.Fprintf(&b, "# veloq bench results (%s run, %s)\n\n", mode, r.Started)
	dirty := ""
	if m.VeloqDirty {
		dirty = " (work tree had uncommitted changes)"
	}
	fmt.Fprintf(&b, "- machine: %s, %d CPUs, kernel %s, %s\n", m.CPUModel, m.CPUs, m.Kernel, m.GoVersion)
	fmt.Fprintf(&b, "- veloq commit: %s%s\n", m.VeloqCommit, dirty)
	fmt.Fprintf(&b, "- load average: %s at start, %s at end\n", m.LoadAvgStart, m.LoadAvgEnd)
	pin := fmt.Sprintf("server pinned to CPU %s, load generator to CPU %s", s.ServerCPU, s.LoadCPU)
	if s.ServerCPU == "" || s.LoadCPU == "" {
		pin = fmt.Sprintf("pinning: server CPU %q, load generator CPU %q (empty = not pinned)", s.ServerCPU, s.LoadCPU)
	}
	fmt.Fprintf(&b, "- method: %s; one server loop; warmup %gs then a %gs measured window; median of %d repeat(s); server CPU = Δ(utime+stime) over the window (CLK_TCK %d)\n",
		pin, s.WarmupS, s.DurationS, s.Repeats, m.ClockTicks)
	fmt.Fprintf(&b, "- took %.0fs\n", r.ElapsedS)

	for _, sc := range r.Scenarios {
		head := ""
		if sc.Headline {
			head = " — headline"
		}
		var notes []string
		switch sc.Kind {
		case kindLoad:
			fmt.Fprintf(&b, "\n## %s%s\n\n", sc.Title, head)
			fmt.Fprintf(&b, "`%s`: closed loop, %d connection(s), %d B messages, pipeline %d.\n\n", sc.Name, sc.Conns, sc.Size, sc.Pipeline)
			b.WriteString("| server | req/s | vs stdlib | p50 µs | p90 µs | p99 µs | p99.9 µs | server CPU | req per server CPU-s | vs stdlib | loadgen CPU | errors |\n")
			b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
			for _, sv := range sc.Servers {
				l := sv.Load
				if l == nil {
					fmt.Fprintf(&b, "| %s | failed | | | | | | | | | | |\n", sv.Server)
				} else {
					var rr Ratios
					if sv.Baseline != nil {
						rr = *sv.Baseline
					}
					fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n",
						sv.Server, num(l.RPS), ratio(rr.RPS), lat(l.P50), lat(l.P90), lat(l.P99), lat(l.P999),
						pct(l.ServerCPUUtil), num(l.ReqPerServerCPUS), ratio(rr.ReqPerCPU), pct(l.ClientCPUUtil), l.Errors)
				}
				notes = append(notes, runNotes(sv)...)
			}
		case kindIdle:
			fmt.Fprintf(&b, "\n## %s: %s\n\n", sc.Title, num(float64(sc.Conns)))
			fmt.Fprintf(&b, "`%s`: %d connections opened, one %d B echo each, then held idle; server VmRSS before, while held, and after close.\n\n", sc.Name, sc.Conns, sc.Size)
			b.WriteString("| server | conns held | RSS before MiB | RSS held MiB | KiB per idle conn | vs stdlib | RSS after close MiB | fds held | fds after close | errors |\n")
			b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
			for _, sv := range sc.Servers {
				i := sv.Idle
				if i == nil {
					fmt.Fprintf(&b, "| %s | failed | | | | | | | | |\n", sv.Server)
				} else {
					var rr Ratios
					if sv.Baseline != nil {
						rr = *sv.Baseline
					}
					fmt.Fprintf(&b, "| %s | %s | %.1f | %.1f | %.2f | %s | %.1f | %s | %s | %d |\n",
						sv.Server, num(i.ConnsOK), i.RSSBeforeKiB/1024, i.RSSHeldKiB/1024, i.KiBPerConn, ratio(rr.KiBPerConn),
						i.RSSAfterCloseKiB/1024, num(i.FDsHeld), num(i.FDsAfterClose), i.Errors)
				}
				notes = append(notes, runNotes(sv)...)
			}
		}
		if len(notes) > 0 {
			b.WriteString("\n")
			for _, n := range notes {
				fmt.Fprintf(&b, "- %s\n", n)
			}
		}
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
