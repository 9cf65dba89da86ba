package main

import (
	"math"
	"strings"
	"testing"

	"github.com/veloq/veloq/bench/internal/result"
)

func TestMedian(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Fatalf("median odd = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Fatalf("median even = %v", m)
	}
	if !math.IsNaN(median(nil)) {
		t.Fatal("median of nothing should be NaN")
	}
}

func TestNum(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -12345: "-12,345"} {
		if got := num(in); got != want {
			t.Errorf("num(%v) = %q, want %q", in, got, want)
		}
	}
}

func loadRun(rps, perCPU float64) Run {
	return Run{Load: &result.Load{RPS: rps, ReqPerServerCPUS: perCPU}}
}

func TestSummarize(t *testing.T) {
	sr := ScenarioResult{Kind: kindLoad, Servers: []ServerResult{
		{Server: "stdlib", Runs: []Run{loadRun(100, 10), loadRun(300, 30), loadRun(200, 20)}},
		{Server: "veloq-uring", Runs: []Run{loadRun(400, 40), {Error: "boom"}, loadRun(600, 60)}},
	}}
	sr.summarize()
	std, v := sr.Servers[0], sr.Servers[1]
	if std.Load.RPS != 200 || std.OK != 3 {
		t.Fatalf("stdlib median = %+v", std.Load)
	}
	if v.OK != 2 || v.Load.RPS != 500 {
		t.Fatalf("veloq median over the 2 good runs = %+v", v.Load)
	}
	if v.Baseline.RPS != 2.5 || v.Baseline.ReqPerCPU != 2.5 {
		t.Fatalf("ratios = %+v", v.Baseline)
	}
	md := (&Report{Scenarios: []ScenarioResult{sr}}).markdown()
	if !strings.Contains(md, "| veloq-uring | 500 | 2.50× |") || !strings.Contains(md, "rep 0 failed: boom") {
		t.Fatalf("markdown:\n%s", md)
	}
}
