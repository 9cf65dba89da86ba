// Package bench_test checks the bench scripts themselves: abab.py's
// verdicts on made-up rounds, and regress.sh end to end in its --smoke
// form (real builds, real servers on 127.0.0.1, a few seconds of load).
package bench_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// run runs a command in this directory and returns its combined output
// and exit status (-1 when it did not run or was killed).
func run(t *testing.T, timeout time.Duration, name string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit) && ctx.Err() == nil:
		return string(out), exit.ExitCode()
	default:
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		return "", -1
	}
}

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
}

// rounds builds a record of abab.py --json's shape: a cost per round for
// each side, and workErrors errors in work's first round.
func rounds(t *testing.T, base, work, base2 []float64, workErrors int) string {
	t.Helper()
	type run struct {
		Cost   float64 `json:"cost"`
		Errors int     `json:"errors"`
	}
	list := func(v []float64, errs int) []run {
		r := make([]run, len(v))
		for i, x := range v {
			r[i].Cost = x
		}
		r[0].Errors = errs
		return r
	}
	b, err := json.Marshal(map[string]any{"label": "s", "unit": "µs", "runs": map[string][]run{
		"base": list(base, 0), "work": list(work, workErrors), "base2": list(base2, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestJudgeVerdicts(t *testing.T) {
	need(t, "python3")
	cases := []struct {
		name, record, verdict  string
		exit, exitFailuresOnly int
	}{
		{"regression beyond the noise",
			rounds(t, []float64{10, 10, 10}, []float64{11.5, 11.2, 11.8}, []float64{10.1, 9.9, 10.2}, 0),
			"REGRESSION +14.4% (beyond ±2.0%)", 1, 0},
		{"improvement beyond the noise",
			rounds(t, []float64{10, 10, 10}, []float64{8, 8.5, 8.2}, []float64{10.1, 9.9, 10}, 0),
			"improvement -18.0% (beyond ±2.0%)", 0, 0},
		{"one round inside the noise keeps it from a verdict",
			rounds(t, []float64{10, 10, 10}, []float64{11.5, 10.1, 11.8}, []float64{10, 10, 10}, 0),
			"within noise (±2.0%)", 0, 0},
		{"noise wider than the floor sets the threshold",
			rounds(t, []float64{10, 10}, []float64{11, 11}, []float64{11.5, 10}, 0),
			"within noise (±15.0%)", 0, 0},
		{"errors only in work",
			rounds(t, []float64{10}, []float64{10}, []float64{10}, 3),
			"ERRORS: work made 3, base none", 1, 1},
		{"work failed", `{"label":"f","unit":"µs","runs":{},"failed":"round 1, work: port 19801 never opened:\nlog","failed_server":"work"}`,
			"FAILED: round 1, work: port 19801 never opened:", 1, 1},
		{"base failed: a scenario newer than base", `{"label":"b","unit":"µs","runs":{},"failed_server":"base",` +
			`"failed":"round 1, base: the server exited (2) before port 19801 opened: flag provided but not defined: -tls-self-signed\nusage"}`,
			"n/a: base failed: round 1, base: the server exited (2) before port 19801 opened: flag provided but not defined: -tls-self-signed", 0, 0},
		{"a missing tool", `{"label":"s","skip":"wrk is not installed (apt-get install wrk)"}`,
			"SKIP: wrk is not installed (apt-get install wrk)", 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "runs.jsonl")
			if err := os.WriteFile(file, []byte(c.record+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, g := range []struct {
				gate string
				exit int
			}{{"all", c.exit}, {"failures", c.exitFailuresOnly}} {
				out, code := run(t, time.Minute, "python3", "abab.py", "--judge", file, "--gate", g.gate)
				if !strings.Contains(out, "| "+c.verdict+" |") {
					t.Fatalf("--gate %s: no verdict %q in\n%s", g.gate, c.verdict, out)
				}
				if code != g.exit {
					t.Fatalf("--gate %s: exit %d, want %d\n%s", g.gate, code, g.exit, out)
				}
			}
		})
	}
}

func TestRegressUsage(t *testing.T) {
	need(t, "bash", "git", "python3", "go", "taskset")
	for _, args := range [][]string{
		{},
		{"HEAD", "--only", "no-such-scenario"},
		{"HEAD", "--rounds", "0"},
		{"HEAD", "--secs"},
		{"HEAD", "--floor", "lots"},
		{"HEAD", "--backends", "kqueue"},
		{"no-such-commit-0123456789"},
	} {
		out, code := run(t, time.Minute, "./regress.sh", args...)
		if code != 2 {
			t.Fatalf("regress.sh %v: exit %d, want 2 (usage)\n%s", args, code, out)
		}
	}
}

// TestRegressSmoke runs the guard against HEAD in its seconds-long form:
// every kind of scenario (a JSON load generator with its own CPU window,
// h2load's text, UDP, a memory figure, the proxy with its backend) must
// run on both builds and be judged, and none may fail.
func TestRegressSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds veloq twice and runs servers: not in -short")
	}
	need(t, "bash", "git", "python3", "go", "taskset")
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	only := []string{"echo-64B", "http-plain", "h2-tls", "udp-64B", "proxy-slowread-mem", "idle-h2-mem"}
	out := filepath.Join(t.TempDir(), "regress.md")
	log, code := run(t, 10*time.Minute, "./regress.sh", "HEAD", "--smoke", "--only", strings.Join(only, ","), "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, log)
	}
	md, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range only {
		var row string
		for _, line := range strings.Split(string(md), "\n") {
			if strings.HasPrefix(line, "| "+sc+" (uring) |") {
				row = line
			}
		}
		tool := map[string]string{"http-plain": "wrk", "h2-tls": "h2load"}[sc]
		_, missing := exec.LookPath(tool)
		switch {
		case row == "":
			t.Fatalf("no row for %s in\n%s", sc, md)
		case tool != "" && missing != nil:
			if !strings.Contains(row, "SKIP: "+tool+" is not installed") {
				t.Fatalf("%s without %s: %s", sc, tool, row)
			}
		case !strings.Contains(row, "within noise") && !strings.Contains(row, "REGRESSION") && !strings.Contains(row, "improvement"):
			t.Fatalf("%s was not judged: %s\n%s", sc, row, log)
		}
	}
}
