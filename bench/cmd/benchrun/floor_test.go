package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFloorRunsOnlyInEchoAndHTTP(t *testing.T) {
	ps, _ := plan(allScenarios, allServers, false, false, haveAll)
	for _, p := range ps {
		got := names(p)
		wantEpoll := p.sc.Group == "echo" || p.sc.Group == "http"
		wantURing := p.sc.Group == "echo"
		if slices.Contains(got, floorEpoll) != wantEpoll {
			t.Errorf("%s: c-epoll planned = %v, want %v", p.sc.Name, !wantEpoll, wantEpoll)
		}
		if slices.Contains(got, floorURing) != wantURing {
			t.Errorf("%s: c-uring planned = %v, want %v", p.sc.Name, !wantURing, wantURing)
		}
	}
	// Quick runs the floor where its ratios matter most.
	ps, _ = plan(allScenarios, allServers, true, false, haveAll)
	for sc, want := range map[string][]string{
		"echo-64B-c64":        {floorEpoll, floorURing},
		"http-plaintext-c64":  {floorEpoll},
		"http-pipeline16-c64": {floorEpoll},
	} {
		got := names(byName(t, ps, sc))
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("quick %s: %s not planned (%v)", sc, w, got)
			}
		}
	}
}

func TestFloorArgs(t *testing.T) {
	for _, c := range []struct {
		server, mode, want string
	}{
		{floorEpoll, modeEcho, "epoll_echo -addr A"},
		{floorEpoll, modeHTTP, "epoll_http -addr A"},
		{floorURing, modeEcho, "uring_echo -addr A"},
	} {
		srv, _ := pickServers(c.server)
		if !srv[0].Quiet {
			t.Errorf("%s prints no pid line: it must be Quiet", c.server)
		}
		a, err := srv[0].Args(Scenario{Mode: c.mode}, "A", t.TempDir())
		if err != nil || strings.Join(a, " ") != c.want {
			t.Errorf("%s %s: %q, %v; want %q", c.server, c.mode, a, err, c.want)
		}
	}
	srv, _ := pickServers(floorURing)
	if _, err := srv[0].Args(Scenario{Mode: modeHTTP}, "A", t.TempDir()); err == nil {
		t.Error("c-uring has no HTTP program: Args must fail")
	}
}

// writeSources puts C files into dir.
func writeSources(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFloorSkippedWithoutSources(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-limits")
	srvs := withFloor(allServers, missing, t.TempDir(), true)
	ps, skipped := plan(allScenarios, srvs, false, false, haveAll)
	for _, p := range ps {
		if got := names(p); slices.Contains(got, floorEpoll) || slices.Contains(got, floorURing) {
			t.Errorf("%s: floor planned without its sources: %v", p.sc.Name, got)
		}
	}
	if got := names(byName(t, ps, "echo-64B-c64")); len(got) != 6 {
		t.Errorf("the other echo servers still run: %v", got)
	}
	for _, name := range []string{floorEpoll, floorURing} {
		i := slices.IndexFunc(skipped, func(s string) bool { return strings.HasPrefix(s, "server "+name+" skipped") })
		if i < 0 {
			t.Errorf("no skip message for %s: %q", name, skipped)
			continue
		}
		if msg := skipped[i]; !strings.Contains(msg, missing) || !strings.Contains(msg, floorApt) || !strings.Contains(msg, "-limits") {
			t.Errorf("skip message %q must name the directory, -limits and %q", msg, floorApt)
		}
	}
	// The servers as declared are untouched.
	for _, s := range allServers {
		if s.Programs != nil && s.Missing != nil {
			t.Errorf("withFloor changed the declared %s", s.Name)
		}
	}
}

func TestFloorMissing(t *testing.T) {
	limits, bin := t.TempDir(), t.TempDir()
	writeSources(t, limits, map[string]string{"a.c": "int main(void){return 0;}\n"})
	present := filepath.Join(limits, "a.c") // stands for a header that is there
	srv := func(p cProgram) Server {
		return floorServer("c-test", "test", map[string]cProgram{modeEcho: p})
	}
	cases := []struct {
		name  string
		srv   Server
		dir   string
		build bool
		path  string // PATH, "" = unchanged
		want  string // substring of the reason, "" = can run
	}{
		{"all there", srv(cProgram{Src: "a.c", Headers: []string{present}}), limits, true, "", ""},
		{"no directory", srv(cProgram{Src: "a.c"}), filepath.Join(limits, "x"), true, "", "is not a directory"},
		{"no source", srv(cProgram{Src: "b.c"}), limits, true, "", "b.c not found in " + limits},
		{"no header", srv(cProgram{Src: "a.c", Headers: []string{filepath.Join(limits, "liburing.h")}}), limits, true, "", "liburing.h not found, a.c needs it: " + floorApt},
		{"no gcc", srv(cProgram{Src: "a.c"}), limits, true, t.TempDir(), "gcc not found: " + floorApt},
		{"no-build, not built", srv(cProgram{Src: "a.c"}), limits, false, "", "a is not in " + bin},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.path != "" {
				t.Setenv("PATH", c.path)
			} else if c.want == "" {
				if _, err := exec.LookPath("gcc"); err != nil {
					t.Skip("gcc not installed")
				}
			}
			got := floorMissing(c.srv, c.dir, bin, c.build)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("floorMissing = %q, want %q", got, c.want)
			}
		})
	}
	if err := os.WriteFile(filepath.Join(bin, "a"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := floorMissing(srv(cProgram{Src: "a.c"}), filepath.Join(limits, "x"), bin, false); got != "" {
		t.Errorf("-no-build with the binary in bin/ needs no sources, got %q", got)
	}
}

func TestBuildFloor(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	limits, bin := t.TempDir(), t.TempDir()
	writeSources(t, limits, map[string]string{
		"good.c":   "int main(void){return 0;}\n",
		"broken.c": "int main(void){return nope;}\n",
	})
	good := floorServer("c-good", "builds", map[string]cProgram{modeEcho: {Src: "good.c"}})
	bad := floorServer("c-bad", "does not build", map[string]cProgram{modeEcho: {Src: "good.c"}, modeHTTP: {Src: "broken.c"}})
	std, _ := pickServers(baseline)
	plans := []planned{
		{sc: Scenario{Name: "e", Mode: modeEcho}, servers: []Server{good, bad, std[0]}},
		{sc: Scenario{Name: "h", Mode: modeHTTP}, servers: []Server{bad}},
	}
	var log []string
	out, notes := buildFloor(context.Background(), plans, limits, bin, func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) })
	if len(out) != 1 || !slices.Equal(names(out[0]), []string{"c-good", baseline}) {
		t.Fatalf("plans after the build = %v, want only e with c-good and stdlib", out)
	}
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "server c-bad skipped: gcc broken.c") || !strings.Contains(notes[0], "nope") {
		t.Errorf("notes = %q, want c-bad skipped with gcc's error", notes)
	}
	if err := exec.Command(filepath.Join(bin, "good")).Run(); err != nil {
		t.Errorf("bin/good does not run: %v", err)
	}
	// good.c is compiled once although two servers use it.
	n := 0
	for _, l := range log {
		if strings.Contains(l, "good.c") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("good.c compiled %d times: %q", n, log)
	}
	if len(plans[0].servers) != 3 {
		t.Error("buildFloor must not change the plans it was given")
	}
}

// TestFloorServersServe builds the real floor from the default -limits
// directory, the sources vendored in bench/floor, and checks that each
// server answers on loopback as the scenarios expect: echo byte for byte,
// HTTP with the hello body. Only a missing compiler or liburing skips a
// server: the sources must be there.
func TestFloorServersServe(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	limits, bin := filepath.Join(root, defaultLimits), t.TempDir()
	for _, p := range []cProgram{epollEcho, epollHTTP, uringEcho} {
		if _, err := os.Stat(filepath.Join(limits, p.Src)); err != nil {
			t.Fatalf("the floor's sources are vendored in %s: %v", defaultLimits, err)
		}
	}
	var srvs []Server
	for _, s := range withFloor(allServers, limits, bin, true) {
		if s.Programs == nil {
			continue
		}
		if why := s.Missing(); why != "" {
			t.Logf("%s not tested: %s", s.Name, why)
			continue
		}
		srvs = append(srvs, s)
	}
	if len(srvs) == 0 {
		t.Skip("no floor server can be built here")
	}
	ps, notes := buildFloor(context.Background(), []planned{{servers: srvs}}, limits, bin, t.Logf)
	if len(notes) > 0 {
		t.Fatalf("building the floor: %q", notes)
	}
	for _, srv := range ps[0].servers {
		for _, mode := range srv.Modes {
			t.Run(srv.Name+"/"+mode, func(t *testing.T) {
				addr := startTestServer(t, srv, mode, bin)
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if mode == modeHTTP {
					checkHello(t, c)
				} else {
					checkEcho(t, c)
				}
			})
		}
	}
}

// startTestServer starts srv's program for mode from bin on a free loopback port and
// returns the address once it accepts; the server is killed at cleanup.
func startTestServer(t *testing.T, srv Server, mode, bin string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args, err := srv.Args(Scenario{Mode: mode}, addr, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, args[0]), args[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	for deadline := time.Now().Add(5 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return addr
		}
		select {
		case werr := <-exited:
			t.Fatalf("%s exited before accepting: %v: %s", args[0], werr, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not accepting on %s: %v", args[0], addr, err)
		}
		time.Sleep(10 * time.Millisecond) // polling for the port, not synchronizing
	}
}

func checkEcho(t *testing.T, c net.Conn) {
	t.Helper()
	for i := range 3 {
		msg := bytes.Repeat([]byte{byte('a' + i)}, 64<<i)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("echo %d: got %q", i, got)
		}
	}
}

func checkHello(t *testing.T, c net.Conn) {
	t.Helper()
	// Two requests pipelined: two answers, each with the hello body.
	if _, err := io.WriteString(c, strings.Repeat("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 2)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	for i := range 2 {
		status, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
			t.Fatalf("response %d: status %q, %v", i, status, err)
		}
		length := -1
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if l == "\r\n" {
				break
			}
			if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, "Content-Length") {
				fmt.Sscanf(strings.TrimSpace(v), "%d", &length)
			}
		}
		if length != len(helloBody) {
			t.Fatalf("response %d: Content-Length %d", i, length)
		}
		body := make([]byte, length)
		if _, err := io.ReadFull(r, body); err != nil || string(body) != helloBody {
			t.Fatalf("response %d: body %q, %v", i, body, err)
		}
	}
}
