package main

import (
	"bytes"
	"encoding/xml"
	"io"
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

func sampleReport() *Report {
	echo := ScenarioResult{Name: "echo-64B-c64", Title: "TCP echo, 64 B, 64 conns", Group: "echo", Kind: kindLoad, Headline: true, ServerCPU: "0",
		Servers: []ServerResult{
			{Server: "veloq-uring", Runs: []Run{loadRun(300, 30)}},
			{Server: "veloq-epoll", Runs: []Run{loadRun(200, 25)}},
			{Server: "stdlib", Runs: []Run{loadRun(100, 10)}},
			{Server: "netpoll", Runs: []Run{{Error: "no <luck> & more"}}},
		}}
	heavy := ScenarioResult{Name: "cpu-heavy-c64", Title: "heavy", Group: "heavy", Kind: kindLoad, Mode: modeHeavy, Work: 200, ServerCPU: "0",
		Servers: []ServerResult{
			{Server: "stdlib", Runs: []Run{loadRun(100, 10)}},
			{Server: "veloq-inline", Runs: []Run{loadRun(120, 12)}},
			{Server: "veloq-offload", Runs: []Run{loadRun(90, 9)}},
		}}
	idle := ScenarioResult{Name: "idle-conns", Title: "Idle connections", Group: "idle", Kind: kindIdle, Conns: 100,
		Servers: []ServerResult{
			{Server: "veloq-uring", Runs: []Run{{Idle: &IdleRun{KiBPerConn: 0.5, RSSHeldKiB: 2048}}}},
			{Server: "stdlib", Runs: []Run{{Idle: &IdleRun{KiBPerConn: 8, RSSHeldKiB: 9000}}}},
		}}
	r := &Report{Command: "bench/run.sh", Machine: Machine{CPUs: 2, LoadAvgStart: "1.90 1.0 1.0"},
		Scenarios: []ScenarioResult{echo, heavy, idle}}
	for i := range r.Scenarios {
		r.Scenarios[i].summarize()
	}
	return r
}

func TestChartsAreWellFormedSVG(t *testing.T) {
	charts := sampleReport().charts()
	if len(charts) != 3 {
		t.Fatalf("want charts for echo, heavy and idle, got %d", len(charts))
	}
	for name, c := range charts {
		svg := c.svg()
		d := xml.NewDecoder(bytes.NewReader(svg))
		for {
			_, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: not well-formed XML: %v\n%s", name, err, svg)
			}
		}
		if !bytes.HasPrefix(svg, []byte("<svg ")) {
			t.Errorf("%s: does not start with <svg", name)
		}
	}
	echo := string(charts["echo"].svg())
	for _, want := range []string{">300  (3.00×)<", ">100<", ">failed<", "veloq-epoll"} {
		if !strings.Contains(echo, want) {
			t.Errorf("echo chart lacks %q", want)
		}
	}
}

func TestPageAndReading(t *testing.T) {
	r := sampleReport()
	page := r.page("/repo", "/repo/bench/results/latest.json", map[string]string{"echo": "/repo/bench/results/latest-echo.svg"})
	for _, want := range []string{
		"```sh\nbench/run.sh\n```",
		"![TCP echo](bench/results/latest-echo.svg)",
		"[bench/results/latest.json](bench/results/latest.json)",
		"**Noisy machine:**",
		"`echo-64B-c64` (headline): most req/s veloq-uring (300) and most req per server CPU-second; against stdlib (req/s / per CPU-s): veloq-uring 3.00× / 3.00×, veloq-epoll 2.00× / 2.50×.",
		"uring/epoll req/s geometric mean 1.50×",
		"offloading to the work-stealing pool gave 0.75× the inline req/s",
		"The server had one CPU",
		"veloq-uring 0.50 KiB, stdlib 8.00 KiB",
		"**Failures or errors**",
		"### TCP echo, 64 B, 64 conns — headline",
		"## io_uring vs epoll",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q\n%s", want, page)
		}
	}
}

func TestFloorRatios(t *testing.T) {
	echo := ScenarioResult{Name: "echo-64B-c64", Title: "echo", Group: "echo", Kind: kindLoad, Mode: modeEcho, Tool: toolTCP,
		Servers: []ServerResult{
			{Server: "veloq-uring", Runs: []Run{loadRun(100, 200_000)}},
			{Server: floorURing, Runs: []Run{loadRun(100, 250_000)}},
			{Server: "veloq-epoll", Runs: []Run{loadRun(100, 150_000)}},
			{Server: floorEpoll, Runs: []Run{loadRun(100, 225_000)}},
			{Server: "stdlib", Runs: []Run{loadRun(100, 90_000)}},
			{Server: "netpoll", Runs: []Run{{Error: "down"}}},
		}}
	echo.summarize()
	for _, c := range []struct {
		server, floor string
		cpu           float64
	}{
		{"veloq-uring", floorURing, 1.25}, // 250k / 200k: a quarter more CPU per message
		{floorURing, floorURing, 1},
		{"veloq-epoll", floorEpoll, 1.5},
		{floorEpoll, floorEpoll, 1},
		{"stdlib", floorEpoll, 2.5},
	} {
		f := echo.find(c.server).Floor
		if f == nil || f.Floor != c.floor || math.Abs(f.CPU-c.cpu) > 1e-9 {
			t.Errorf("%s: floor ratio %+v, want %.2f× %s", c.server, f, c.cpu, c.floor)
		}
	}
	if f := echo.find("netpoll").Floor; f != nil {
		t.Errorf("a failed server has no floor ratio, got %+v", f)
	}
	if std := echo.find("stdlib"); std.Baseline == nil || echo.find("veloq-uring").Baseline.ReqPerCPU != 200_000.0/90_000 {
		t.Error("the ratios to stdlib must stay")
	}

	// HTTP has no io_uring floor: veloq-uring is set against c-epoll's HTTP
	// server; and without a floor in the scenario nobody gets a ratio.
	http := ScenarioResult{Name: "http-plaintext-c64", Title: "http", Group: "http", Kind: kindLoad, Mode: modeHTTP, Tool: toolWrk,
		Servers: []ServerResult{
			{Server: "veloq-uring", Runs: []Run{loadRun(100, 200_000)}},
			{Server: floorEpoll, Runs: []Run{loadRun(100, 240_000)}},
		}}
	http.summarize()
	if f := http.find("veloq-uring").Floor; f == nil || f.Floor != floorEpoll || math.Abs(f.CPU-1.2) > 1e-9 {
		t.Errorf("HTTP veloq-uring floor ratio %+v, want 1.20× c-epoll", f)
	}
	noURing := ScenarioResult{Name: "e", Kind: kindLoad, Mode: modeEcho, Servers: []ServerResult{
		{Server: "veloq-uring", Runs: []Run{loadRun(100, 200_000)}},
		{Server: "stdlib", Runs: []Run{loadRun(100, 100_000)}},
	}}
	noURing.summarize()
	if noURing.hasFloor() {
		t.Error("no floor ran: no floor ratios")
	}

	r := &Report{Scenarios: []ScenarioResult{echo, http, noURing}}
	md := r.markdown()
	for _, want := range []string{
		"| server CPU | req per server CPU-s | vs stdlib | vs floor | loadgen CPU | errors |",
		"| veloq-uring | 100 | 1.00× | 0.0 | 0.0 | 0.0 | 0.0 | 0% | 200,000 | 2.22× | 1.25× | 0% | 0 |",
		"| server CPU | req per server CPU-s | vs stdlib | vs floor | loadgen CPU | resp B | errors |",
		"; veloq-uring against c-uring, the others against c-epoll.",
		"(≥1: more CPU than the floor); against c-epoll.\n",
		"| netpoll | failed | | | | | | | | | | | |",
		"## Against the C floor",
		"| `echo-64B-c64` | veloq-uring | 100 | 5.00 | c-uring | 1.25× |",
		"| `echo-64B-c64` | c-epoll | 100 | 4.44 | c-epoll | 1.00× |",
		"| `http-plaintext-c64` | veloq-uring | 100 | 5.00 | c-epoll | 1.20× |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q\n%s", want, md)
		}
	}
	if strings.Contains(r.floorTable(), "`e`") || strings.Contains(md, "| stdlib | 100 | 1.00× | 0.0 | 0.0 | 0.0 | 0.0 | 0% | 100,000 | 1.00× | - |") {
		t.Errorf("a scenario without a floor gets no floor column or rows\n%s", md)
	}
	if line := loadReading(echo); !strings.Contains(line, "server CPU per request against the C floor: veloq-uring 1.25× c-uring, veloq-epoll 1.50× c-epoll, stdlib 2.50× c-epoll.") {
		t.Errorf("reading: %s", line)
	}
}

func TestPageSaysWhetherTheFloorRan(t *testing.T) {
	r := sampleReport()
	r.Servers = []ServerInfo{{Name: "veloq-uring"}, {Name: "gnet"}, {Name: "stdlib"}, {Name: "netpoll"}}
	page := r.page("/repo", "/repo/bench/results/latest.json", nil)
	if !strings.Contains(page, "did not run in this run, so the tables have no `vs floor` column") || strings.Contains(page, "and against minimal C servers") {
		t.Errorf("a run without the floor must say so, and not claim it:\n%s", page)
	}
	// The opening names the peers that ran, in the order they are declared.
	if !strings.Contains(page, "veloq against Go's standard library, cloudwego/netpoll and panjf2000/gnet on one machine") {
		t.Errorf("the page must name the peers that ran:\n%s", page)
	}
	r.Servers = append(r.Servers, ServerInfo{Name: floorEpoll})
	page = r.page("/repo", "/repo/bench/results/latest.json", nil)
	if strings.Contains(page, "did not run in this run") || !strings.Contains(page, "panjf2000/gnet, and against minimal C servers that mark the floor") {
		t.Errorf("a run with the floor must name it:\n%s", page)
	}
}

// TestGnetHTTPNoteUnderTables checks that the gnet HTTP peer's caveat is
// attached to HTTP scenarios it runs in, not to echo ones, and printed
// under the table.
func TestGnetHTTPNoteUnderTables(t *testing.T) {
	srvs, err := pickServers("veloq-uring,gnet,stdlib")
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := plan(allScenarios, srvs, false, true, haveAll)
	httpNotes := serverNotes(byName(t, ps, "http-plaintext-c64").sc, byName(t, ps, "http-plaintext-c64").servers)
	if len(httpNotes) != 1 || !strings.HasPrefix(httpNotes[0], "gnet: gnet has no HTTP server") {
		t.Fatalf("HTTP notes = %q", httpNotes)
	}
	if n := serverNotes(byName(t, ps, "echo-64B-c64").sc, byName(t, ps, "echo-64B-c64").servers); len(n) != 0 {
		t.Errorf("echo scenarios carry no gnet HTTP caveat, got %q", n)
	}
	sr := ScenarioResult{Name: "http-plaintext-c64", Kind: kindLoad, Mode: modeHTTP, Tool: toolWrk, Notes: httpNotes,
		Servers: []ServerResult{{Server: "gnet", Runs: []Run{loadRun(100, 10)}}}}
	sr.summarize()
	md := sr.markdown("###")
	if !strings.Contains(md, "\n- gnet: gnet has no HTTP server") || !strings.Contains(md, "upper bound") {
		t.Errorf("the caveat must be a note under the table:\n%s", md)
	}
}

// TestBestPeerReading checks that the reading sets veloq against the Go
// peer with the most req per server CPU-second, leaving out a peer whose
// figures carry a caveat for the mode (gnet's HTTP) and the non-Go nginx.
func TestBestPeerReading(t *testing.T) {
	sr := ScenarioResult{Name: "http-plaintext-c64", Kind: kindLoad, Mode: modeHTTP, Servers: []ServerResult{
		{Server: "veloq-uring", Runs: []Run{loadRun(400, 40)}},
		{Server: "stdlib", Runs: []Run{loadRun(100, 10)}},
		{Server: "fasthttp", Runs: []Run{loadRun(200, 20)}},
		{Server: "nbio", Runs: []Run{loadRun(300, 16)}},
		{Server: "gnet", Runs: []Run{loadRun(900, 90)}},
		{Server: "nginx", Runs: []Run{loadRun(800, 80)}},
	}}
	sr.summarize()
	line := loadReading(sr)
	if !strings.Contains(line, "against the most CPU-efficient Go peer, fasthttp (req/s / per CPU-s): veloq-uring 2.00× / 2.00×") {
		t.Errorf("reading: %s", line)
	}
	sr.Mode = modeEcho // gnet's echo has no caveat: it is the best peer there
	if line := loadReading(sr); !strings.Contains(line, "Go peer, gnet (req/s / per CPU-s): veloq-uring 0.44× / 0.44×") {
		t.Errorf("echo reading: %s", line)
	}
}
