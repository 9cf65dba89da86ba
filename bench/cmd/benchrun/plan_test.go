package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func names(p planned) []string {
	var n []string
	for _, s := range p.servers {
		n = append(n, s.Name)
	}
	return n
}

func byName(t *testing.T, ps []planned, name string) planned {
	t.Helper()
	for _, p := range ps {
		if p.sc.Name == name {
			return p
		}
	}
	t.Fatalf("scenario %s not planned", name)
	return planned{}
}

func haveAll(string) string { return "" }

func TestPlanQuickUsesEachScenariosServers(t *testing.T) {
	ps, _ := plan(allScenarios, allServers, true, false, haveAll)
	if len(ps) != len(allScenarios) {
		t.Fatalf("quick must cover every scenario: planned %d of %d", len(ps), len(allScenarios))
	}
	if got := names(byName(t, ps, "echo-64B-c1")); !slices.Equal(got, quickPair) {
		t.Errorf("quick echo-64B-c1 servers = %v, want %v", got, quickPair)
	}
	if got := names(byName(t, ps, "echo-64B-c64")); len(got) != 8 {
		t.Errorf("the headline runs every echo server, the floor included, in quick too, got %v", got)
	}
	for _, p := range ps {
		if !slices.Contains(names(p), baseline) {
			t.Errorf("%s: the baseline %s must run in every scenario", p.sc.Name, baseline)
		}
	}
}

func TestPlanFullAndExplicitServers(t *testing.T) {
	ps, _ := plan(allScenarios, allServers, false, false, haveAll)
	if got := names(byName(t, ps, "echo-64B-c1")); len(got) != 8 {
		t.Errorf("full echo-64B-c1 servers = %v, want all 8 echo servers (6 and the two floors)", got)
	}
	want := []string{"veloq-uring", "veloq-epoll", "veloq-fromstd", "stdlib", "hertz", "gnet", "nbio", "fasthttp", "nginx", "c-epoll"}
	if got := names(byName(t, ps, "http-plaintext-c64")); !slices.Equal(got, want) {
		t.Errorf("full http-plaintext-c64 servers = %v, want %v", got, want)
	}
	if got := names(byName(t, ps, "cpu-heavy-c64")); !slices.Equal(got, []string{"stdlib", "veloq-inline", "veloq-offload"}) {
		t.Errorf("cpu-heavy servers = %v", got)
	}
	// An explicit server list overrides the quick subsets.
	srvs, err := pickServers("veloq-epoll,stdlib")
	if err != nil {
		t.Fatal(err)
	}
	ps, _ = plan(allScenarios, srvs, true, true, haveAll)
	if got := names(byName(t, ps, "echo-64B-c1")); !slices.Equal(got, []string{"veloq-epoll", "stdlib"}) {
		t.Errorf("explicit servers in quick = %v", got)
	}
}

func TestPlanSkipsWhatIsMissing(t *testing.T) {
	noWrk := func(tool string) string {
		if tool == toolWrk {
			return "wrk is not installed: apt-get install wrk"
		}
		return ""
	}
	srvs := slices.Clone(allServers)
	for i := range srvs {
		if srvs[i].Name == "nginx" {
			srvs[i].Missing = func() string { return "nginx is not installed" }
		}
	}
	ps, skipped := plan(allScenarios, srvs, false, false, noWrk)
	for _, p := range ps {
		if p.sc.Mode == modeHTTP {
			t.Errorf("%s planned without wrk", p.sc.Name)
		}
	}
	if !slices.ContainsFunc(skipped, func(s string) bool { return strings.Contains(s, "apt-get install wrk") }) {
		t.Errorf("skips must say how to get wrk: %q", skipped)
	}
	ps, skipped = plan(allScenarios, srvs, false, false, haveAll)
	if got := names(byName(t, ps, "http-plaintext-c64")); slices.Contains(got, "nginx") {
		t.Errorf("nginx planned while missing: %v", got)
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0], "nginx") {
		t.Errorf("skipped = %q, want one nginx message", skipped)
	}
}

func TestScenarios(t *testing.T) {
	seen := map[string]bool{}
	for _, sc := range allScenarios {
		if seen[sc.Name] {
			t.Errorf("duplicate scenario %s", sc.Name)
		}
		seen[sc.Name] = true
		if !slices.ContainsFunc(groups, func(g struct{ Name, Title string }) bool { return g.Name == sc.Group }) {
			t.Errorf("%s: unknown group %q", sc.Name, sc.Group)
		}
		for _, q := range sc.Quick {
			if _, err := pickServers(q); err != nil {
				t.Errorf("%s: quick server: %v", sc.Name, err)
			}
		}
	}
	for _, want := range []string{"echo-4KiB-c1", "echo-4KiB-c512", "echo-64B-c512"} {
		if !seen[want] {
			t.Errorf("scenario %s missing", want)
		}
	}
	s := Settings{warmup: 1, duration: 2}
	churn, _ := pickScenarios("churn-c32")
	if a := churn[0].loadArgs(s, "127.0.0.1:1", 7); a[0] != toolTCP || !slices.Contains(a, "-churn") {
		t.Errorf("churn load args = %q", a)
	}
	http, _ := pickScenarios("http-pipeline16-c64")
	a := http[0].loadArgs(s, "127.0.0.1:1", 7)
	if a[0] != toolWrk || !slices.Contains(a, helloBody) || a[slices.Index(a, "-pipeline")+1] != "16" {
		t.Errorf("pipelined HTTP load args = %q", a)
	}
}

func TestVeloqAndStdlibArgs(t *testing.T) {
	heavy := Scenario{Mode: modeHeavy, Work: 50}
	for _, c := range []struct {
		server string
		sc     Scenario
		want   string
	}{
		{"veloq-uring", Scenario{Mode: modeHTTP}, "echo-server -addr A -loops 1 -backend uring -mode http"},
		{"veloq-epoll", Scenario{Mode: modeEcho}, "echo-server -addr A -loops 1 -backend epoll"},
		{"veloq-offload", heavy, "echo-server -addr A -loops 1 -backend uring -work 50 -offload"},
		{"veloq-inline", heavy, "echo-server -addr A -loops 1 -backend uring -work 50"},
		{"stdlib", heavy, "stdecho -addr A -work 50"},
		{"stdlib", Scenario{Mode: modeHTTP}, "stdhttp -addr A"},
	} {
		srv, _ := pickServers(c.server)
		a, err := srv[0].Args(c.sc, "A", t.TempDir())
		if err != nil || strings.Join(a, " ") != c.want {
			t.Errorf("%s %s: %q, %v; want %q", c.server, c.sc.Mode, a, err, c.want)
		}
	}
}

// TestNginxConfig writes the config and, where nginx is installed, has
// nginx check it.
func TestNginxConfig(t *testing.T) {
	if nginxMissing() != "" {
		t.Skip("nginx not installed")
	}
	dir := t.TempDir()
	a, err := nginxArgs(Scenario{Mode: modeHTTP}, "127.0.0.1:19999", dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(a[0], append(a[1:], "-t")...).CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
}

func TestCPUCount(t *testing.T) {
	for in, want := range map[string]int{"": 0, "0": 1, "0,1": 2, "0-3": 4, "0,2-3": 3, "x": 0, "3-1": 0} {
		if got := cpuCount(in); got != want {
			t.Errorf("cpuCount(%q) = %d, want %d", in, got, want)
		}
	}
}
