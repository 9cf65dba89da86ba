package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Server modes: what a server is asked to serve in a scenario.
const (
	modeEcho  = "echo"  // TCP echo
	modeHTTP  = "http"  // HTTP/1.1: GET / answers 200 helloBody as text/plain
	modeHeavy = "heavy" // TCP echo with Scenario.Work rounds of hashing per message
)

// helloBody is what every HTTP server answers to GET /; wrkload checks it
// before each run so that all of them do the same work.
const helloBody = "Hello, World!"

// Server is one implementation under test.
type Server struct {
	Name  string
	What  string   // what it is, for the report
	Modes []string // the modes it serves; other scenarios skip it
	// Backend, when set, must appear as "backend <Backend>" in the server's
	// first line; otherwise the run is flagged (e.g. io_uring fell back).
	Backend string
	// Quiet servers print no "... pid N" line when they start (nginx); the
	// started process's PID is used and readiness is the port accepting.
	Quiet bool
	// Args returns the command line for scenario sc: a binary (relative to
	// bin/, or absolute), then flags. addr is where to listen; dir is a
	// fresh scratch directory for this run (config files, logs).
	Args func(sc Scenario, addr, dir string) ([]string, error)
	// Missing, if set, says why the server cannot run on this machine ("" =
	// it can); such a server is skipped with that message.
	Missing func() string
	// Groups, when set, limits the server to scenarios of these groups.
	Groups []string
	// Programs, for a floor server built from C at the start of a run,
	// gives the program serving each of its modes (see floor.go).
	Programs map[string]cProgram
	// Peer names the project a comparison server stands for, for the
	// page's opening sentence ("" for veloq itself and the C floor).
	Peer string
	// Notes, per mode, is a caveat printed under every table of that mode
	// the server appears in (e.g. a peer that does less work than the rest).
	Notes map[string]string
}

func (s Server) serves(mode string) bool { return slices.Contains(s.Modes, mode) }

// runsIn says whether the server takes part in scenario sc.
func (s Server) runsIn(sc Scenario) bool {
	return s.serves(sc.Mode) && (s.Groups == nil || slices.Contains(s.Groups, sc.Group))
}

// baseline is the server every other is compared with: the Go standard
// library (goroutine per connection for TCP, net/http for HTTP).
const baseline = "stdlib"

var allServers = []Server{
	{Name: "veloq-uring", Backend: "uring", Modes: []string{modeEcho, modeHTTP},
		What: "veloq `cmd/echo-server`, one loop, io_uring backend", Args: veloqArgs("uring", false)},
	{Name: "veloq-epoll", Backend: "epoll", Modes: []string{modeEcho, modeHTTP},
		What: "veloq `cmd/echo-server`, one loop, epoll backend", Args: veloqArgs("epoll", false)},
	{Name: "veloq-fromstd", Backend: "uring", Modes: []string{modeHTTP},
		What: "veloq `echo-server -mode http-std`: the stdlib peer's net/http handler through `FromStd`, one loop, io_uring",
		Args: func(_ Scenario, addr, _ string) ([]string, error) {
			return []string{"echo-server", "-addr", addr, "-loops", "1", "-backend", "uring", "-mode", "http-std"}, nil
		}},
	{Name: "stdlib", Peer: "Go's standard library", Modes: []string{modeEcho, modeHTTP, modeHeavy},
		What: "Go standard library: goroutine per connection (`peers/stdecho`); `net/http` for HTTP (`peers/stdhttp`)",
		Args: func(sc Scenario, addr, _ string) ([]string, error) {
			switch sc.Mode {
			case modeHTTP:
				return []string{"stdhttp", "-addr", addr}, nil
			case modeHeavy:
				return []string{"stdecho", "-addr", addr, "-work", strconv.Itoa(sc.Work)}, nil
			}
			return []string{"stdecho", "-addr", addr}, nil
		}},
	{Name: "netpoll", Peer: "cloudwego/netpoll", Modes: []string{modeEcho},
		What: "cloudwego/netpoll echo, one poller (`peers/netpollecho`)",
		Args: func(_ Scenario, addr, _ string) ([]string, error) {
			return []string{"netpollecho", "-addr", addr, "-loops", "1"}, nil
		}},
	{Name: "hertz", Peer: "cloudwego/hertz", Modes: []string{modeHTTP},
		What: "cloudwego/hertz (`peers/hertzhttp`)",
		Args: func(_ Scenario, addr, _ string) ([]string, error) {
			return []string{"hertzhttp", "-addr", addr}, nil
		}},
	{Name: "gnet", Peer: "panjf2000/gnet", Modes: []string{modeEcho, modeHTTP},
		What:  "panjf2000/gnet/v2, one event loop: echo (`peers/gnetecho`); HTTP (`peers/gnethttp`) with the minimal framing gnet's own HTTP example uses, not an HTTP parser",
		Notes: map[string]string{modeHTTP: gnetHTTPNote},
		Args: func(sc Scenario, addr, _ string) ([]string, error) {
			if sc.Mode == modeHTTP {
				return []string{"gnethttp", "-addr", addr, "-loops", "1"}, nil
			}
			return []string{"gnetecho", "-addr", addr, "-loops", "1"}, nil
		}},
	{Name: "nbio", Peer: "lesismal/nbio", Modes: []string{modeEcho, modeHTTP},
		What: "lesismal/nbio, one poller: echo (`peers/nbioecho`); HTTP: nbhttp with a net/http handler run on the poller goroutine (`peers/nbiohttp -inline`)",
		Args: func(sc Scenario, addr, _ string) ([]string, error) {
			if sc.Mode == modeHTTP {
				return []string{"nbiohttp", "-addr", addr, "-loops", "1", "-inline"}, nil
			}
			return []string{"nbioecho", "-addr", addr, "-loops", "1"}, nil
		}},
	{Name: "fasthttp", Peer: "valyala/fasthttp", Modes: []string{modeHTTP},
		What: "valyala/fasthttp, its worker pool of goroutines per connection (`peers/fasthttp`)",
		Args: func(_ Scenario, addr, _ string) ([]string, error) {
			return []string{"fasthttp", "-addr", addr}, nil
		}},
	{Name: "nginx", Peer: "nginx", Modes: []string{modeHTTP}, Quiet: true,
		What:    "nginx from the distribution, one process (`master_process off`), `return 200` from the config",
		Missing: nginxMissing, Args: nginxArgs},
	{Name: "veloq-inline", Backend: "uring", Modes: []string{modeHeavy},
		What: "veloq `echo-server -work N`: the hashing runs on the loop", Args: veloqArgs("uring", false)},
	{Name: "veloq-offload", Backend: "uring", Modes: []string{modeHeavy},
		What: "veloq `echo-server -work N -offload`: the hashing runs on the work-stealing pool", Args: veloqArgs("uring", true)},
	floorServer(floorEpoll, "the epoll floor: a minimal single-threaded C server on level-triggered epoll (`epoll_echo.c` for TCP echo, `epoll_http.c` for HTTP, which answers every request ending in an empty line with one fixed response and validates nothing), built with gcc -O2 from `bench/floor/`",
		map[string]cProgram{modeEcho: epollEcho, modeHTTP: epollHTTP}),
	floorServer(floorURing, "the io_uring floor: a minimal single-threaded C TCP echo server (`uring_echo.c`: multishot accept and receive into a provided buffer ring, each chunk sent back from the buffer it arrived in), built with gcc -O2 and liburing from `bench/floor/`",
		map[string]cProgram{modeEcho: uringEcho}),
}

// serverNotes lists the caveats of srvs for sc's mode, each as "name: note".
func serverNotes(sc Scenario, srvs []Server) []string {
	var out []string
	for _, srv := range srvs {
		if n := srv.Notes[sc.Mode]; n != "" {
			out = append(out, srv.Name+": "+n)
		}
	}
	return out
}

// gnetHTTPNote is printed under every HTTP table gnet is in.
const gnetHTTPNote = "gnet has no HTTP server: `peers/gnethttp` frames requests the way gnet's own HTTP example does " +
	"(the head ends at the first empty line, a Content-Length body is skipped) and answers each with one fixed response; " +
	"it parses no method, target or header beyond that, so its figures are an upper bound for an event-loop HTTP server on gnet, " +
	"not a like-for-like HTTP/1.1 server."

func veloqArgs(backend string, offload bool) func(sc Scenario, addr, dir string) ([]string, error) {
	return func(sc Scenario, addr, _ string) ([]string, error) {
		a := []string{"echo-server", "-addr", addr, "-loops", "1", "-backend", backend}
		switch sc.Mode {
		case modeHTTP:
			a = append(a, "-mode", "http")
		case modeHeavy:
			a = append(a, "-work", strconv.Itoa(sc.Work))
			if offload {
				a = append(a, "-offload")
			}
		}
		return a, nil
	}
}

// nginxBin finds nginx on PATH or where Debian puts it (/usr/sbin is not
// on every user's PATH).
func nginxBin() (string, error) {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	const deb = "/usr/sbin/nginx"
	if _, err := os.Stat(deb); err != nil {
		return "", fmt.Errorf("nginx not found on PATH or at %s", deb)
	}
	return deb, nil
}

func nginxMissing() string {
	if _, err := nginxBin(); err != nil {
		return "nginx is not installed (apt-get install nginx): the nginx HTTP baseline is skipped"
	}
	return ""
}

// nginxConf serves helloBody on addr from one process in the foreground,
// with every path it writes inside dir, so it runs as an ordinary user
// without touching the packaged configuration. keepalive_requests is raised
// so that nginx does not close wrk's keep-alive connections every 1000
// requests (its default), which the other servers never do.
const nginxConf = `# written by veloq's bench/cmd/benchrun for one run
worker_processes 1;
master_process off;
daemon off;
pid {{dir}}/nginx.pid;
error_log {{dir}}/error.log warn;
events {
    worker_connections 16384;
}
http {
    access_log off;
    client_body_temp_path {{dir}}/client_body;
    proxy_temp_path {{dir}}/proxy;
    fastcgi_temp_path {{dir}}/fastcgi;
    uwsgi_temp_path {{dir}}/uwsgi;
    scgi_temp_path {{dir}}/scgi;
    keepalive_requests 100000000;
    server {
        listen {{addr}};
        location = / {
            default_type text/plain;
            return 200 "{{body}}";
        }
    }
}
`

func nginxArgs(_ Scenario, addr, dir string) ([]string, error) {
	bin, err := nginxBin()
	if err != nil {
		return nil, err
	}
	conf := strings.NewReplacer("{{dir}}", dir, "{{addr}}", addr, "{{body}}", helloBody).Replace(nginxConf)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, fmt.Errorf("writing nginx config: %w", err)
	}
	// -e: the error log before the config is read (nginx would otherwise
	// try the packaged /var/log/nginx/error.log first).
	return []string{bin, "-p", dir + "/", "-c", path, "-e", filepath.Join(dir, "error.log")}, nil
}

// Scenario kinds.
const (
	kindLoad = "load" // throughput/latency/CPU under a closed-loop load generator
	kindIdle = "idle" // memory held per idle connection
)

// Load generators (binaries in bin/).
const (
	toolTCP = "tcpload"
	toolWrk = "wrkload"
)

// Scenario groups: each is a section of the report and one chart.
var groups = []struct{ Name, Title string }{
	{"echo", "TCP echo"},
	{"http", "HTTP"},
	{"churn", "Connection churn"},
	{"heavy", "CPU-heavy handler"},
	{"idle", "Idle connections"},
}

// Scenario is one workload.
type Scenario struct {
	Name     string
	Title    string
	Desc     string // how the load is made, for the report
	Group    string
	Kind     string
	Mode     string // server mode
	Tool     string // load generator, for kindLoad
	Headline bool
	Conns    int
	Size     int // message size (TCP)
	Pipeline int
	Churn    bool
	Work     int // hashing rounds per message (modeHeavy); set from Settings
	// Quick lists the servers a -quick run uses (nil: all), to keep the
	// quick suite near two minutes while still covering every scenario.
	Quick []string
}

// loadArgs is the load generator's command line (binary relative to bin/).
func (sc Scenario) loadArgs(s Settings, addr string, pid int) []string {
	common := []string{"-addr", addr, "-conns", strconv.Itoa(sc.Conns),
		"-pipeline", strconv.Itoa(sc.Pipeline),
		"-warmup", s.warmup.String(), "-duration", s.duration.String(),
		"-server-pid", strconv.Itoa(pid), "-json"}
	if sc.Tool == toolWrk {
		return append([]string{toolWrk, "-expect", helloBody}, common...)
	}
	a := append([]string{toolTCP, "-size", strconv.Itoa(sc.Size)}, common...)
	if sc.Churn {
		a = append(a, "-churn")
	}
	return a
}

// sizeName is a message size for names ("4KiB"), sizeTitle for prose ("4 KiB").
func sizeName(n int) string { return strings.ReplaceAll(sizeTitle(n), " ", "") }

func sizeTitle(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func echoScenario(size, conns int, headline bool, quick ...string) Scenario {
	return Scenario{
		Name:  fmt.Sprintf("echo-%s-c%d", sizeName(size), conns),
		Title: fmt.Sprintf("TCP echo, %s messages, %s", sizeTitle(size), plural(conns, "connection", "connections")),
		Desc: fmt.Sprintf("tcpload: %s, each with one %d-byte message in flight (write, read the echo back, compare, repeat)",
			plural(conns, "connection", "connections"), size),
		Group: "echo", Kind: kindLoad, Mode: modeEcho, Tool: toolTCP, Headline: headline,
		Conns: conns, Size: size, Pipeline: 1, Quick: quick,
	}
}

// quickPair is the smallest useful server set: veloq and the baseline.
var quickPair = []string{"veloq-uring", baseline}

var allScenarios = []Scenario{
	echoScenario(64, 1, false, quickPair...),
	echoScenario(64, 64, true),
	echoScenario(64, 512, false, quickPair...),
	echoScenario(4096, 1, false, quickPair...),
	echoScenario(4096, 64, false, quickPair...),
	echoScenario(4096, 512, false, quickPair...),
	{Name: "http-plaintext-c64", Title: "HTTP plaintext, keep-alive, 64 connections",
		Desc:  "wrk -t1: 64 keep-alive connections, GET / answered with `" + helloBody + "` (text/plain), one request in flight per connection",
		Group: "http", Kind: kindLoad, Mode: modeHTTP, Tool: toolWrk, Conns: 64, Pipeline: 1},
	{Name: "http-pipeline16-c64", Title: "HTTP plaintext, 16-deep pipelining, 64 connections",
		Desc:  "wrk -t1: 64 keep-alive connections, each sending 16 GET / back to back and waiting for all 16 answers; latency is per batch of 16",
		Group: "http", Kind: kindLoad, Mode: modeHTTP, Tool: toolWrk, Conns: 64, Pipeline: 16,
		Quick: []string{"veloq-uring", baseline, "nginx", floorEpoll}},
	{Name: "churn-c32", Title: "Connection churn: a new connection per request, 32 at a time",
		Desc:  "tcpload -churn: 32 workers, each connecting, echoing one 64-byte message, closing, and starting over; latency includes the connect",
		Group: "churn", Kind: kindLoad, Mode: modeEcho, Tool: toolTCP, Conns: 32, Size: 64, Pipeline: 1, Churn: true,
		Quick: quickPair},
	{Name: "cpu-heavy-c64", Title: "CPU-heavy handler: inline vs offloaded, 64 connections",
		Desc:  "tcpload: 64 connections, 64-byte messages; the server hashes each message (FNV-1a, N rounds) before echoing it",
		Group: "heavy", Kind: kindLoad, Mode: modeHeavy, Tool: toolTCP, Conns: 64, Size: 64, Pipeline: 1},
	{Name: "idle-conns", Title: "Idle connections", Group: "idle", Kind: kindIdle, Mode: modeEcho, Size: 64,
		Quick: quickPair},
}

func serverNames() []string {
	var n []string
	for _, s := range allServers {
		n = append(n, s.Name)
	}
	return n
}

func scenarioNames() []string {
	var n []string
	for _, s := range allScenarios {
		n = append(n, s.Name)
	}
	return n
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func pickServers(list string) ([]Server, error) {
	want := splitList(list)
	if len(want) == 0 {
		return allServers, nil
	}
	var out []Server
	for _, w := range want {
		i := slices.IndexFunc(allServers, func(s Server) bool { return s.Name == w })
		if i < 0 {
			return nil, fmt.Errorf("unknown server %q (have %s)", w, strings.Join(serverNames(), ", "))
		}
		out = append(out, allServers[i])
	}
	return out, nil
}

func pickScenarios(list string) ([]Scenario, error) {
	want := splitList(list)
	if len(want) == 0 {
		return allScenarios, nil
	}
	var out []Scenario
	for _, w := range want {
		i := slices.IndexFunc(allScenarios, func(s Scenario) bool { return s.Name == w })
		if i < 0 {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", w, strings.Join(scenarioNames(), ", "))
		}
		out = append(out, allScenarios[i])
	}
	return out, nil
}

// planned is a scenario with the servers that will run it.
type planned struct {
	sc      Scenario
	servers []Server
}

// plan decides which servers run which scenario. Servers that lack the
// scenario's mode are left out; with quick (and no explicit server list)
// only the scenario's Quick servers run. Servers or tools missing on this
// machine are left out, and every such omission is returned as a message.
func plan(scs []Scenario, srvs []Server, quick, explicitServers bool, have func(tool string) string) ([]planned, []string) {
	var out []planned
	var skipped []string
	noted := map[string]bool{}
	note := func(msg string) {
		if !noted[msg] {
			noted[msg] = true
			skipped = append(skipped, msg)
		}
	}
	for _, sc := range scs {
		if sc.Kind == kindLoad {
			if why := have(sc.Tool); why != "" {
				note(fmt.Sprintf("scenario %s skipped: %s", sc.Name, why))
				continue
			}
		}
		p := planned{sc: sc}
		for _, srv := range srvs {
			if !srv.runsIn(sc) {
				continue
			}
			if quick && !explicitServers && sc.Quick != nil && !slices.Contains(sc.Quick, srv.Name) {
				continue
			}
			if srv.Missing != nil {
				if why := srv.Missing(); why != "" {
					note(fmt.Sprintf("server %s skipped: %s", srv.Name, why))
					continue
				}
			}
			p.servers = append(p.servers, srv)
		}
		if len(p.servers) > 0 {
			out = append(out, p)
		}
	}
	return out, skipped
}
