package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Server is one implementation under test. Args returns its command line
// (binary relative to bin/, then flags) for a server mode, or nil when the
// server has no such mode. Modes today: "echo". An HTTP scenario adds "http"
// here (veloq's `-mode http`, a net/http peer, ...) and the servers that
// lack it are skipped for that scenario.
type Server struct {
	Name string
	Args func(mode, addr string) []string
	// Backend, when set, must appear as "backend <Backend>" in the server's
	// first line; otherwise the run is flagged (e.g. io_uring fell back).
	Backend string
}

var allServers = []Server{
	{Name: "veloq-uring", Backend: "uring", Args: veloqArgs("uring")},
	{Name: "veloq-epoll", Backend: "epoll", Args: veloqArgs("epoll")},
	{Name: "stdlib", Args: func(mode, addr string) []string {
		if mode != "echo" {
			return nil
		}
		return []string{"stdecho", "-addr", addr}
	}},
	{Name: "netpoll", Args: func(mode, addr string) []string {
		if mode != "echo" {
			return nil
		}
		return []string{"netpollecho", "-addr", addr, "-loops", "1"}
	}},
}

// baseline is the server every other is compared with.
const baseline = "stdlib"

func veloqArgs(backend string) func(mode, addr string) []string {
	return func(mode, addr string) []string {
		if mode != "echo" {
			return nil
		}
		return []string{"echo-server", "-addr", addr, "-loops", "1", "-backend", backend}
	}
}

// Scenario kinds.
const (
	kindLoad = "load" // throughput/latency/CPU under a closed-loop load generator
	kindIdle = "idle" // memory held per idle connection
)

// Scenario is one workload. For kindLoad, Load returns the load generator's
// command line (binary relative to bin/, then flags); the generator must
// print one result.Load JSON object on stdout. An HTTP scenario is a new
// entry with Mode "http" and a Load pointing at an HTTP load generator.
type Scenario struct {
	Name     string
	Title    string
	Kind     string
	Mode     string // server mode, passed to Server.Args
	FullOnly bool   // skipped with -quick
	Headline bool
	Conns    int
	Size     int
	Pipeline int
	Load     func(sc Scenario, s Settings, addr string, serverPID int) []string
}

func tcpEcho(name, title string, conns, size int, fullOnly, headline bool) Scenario {
	return Scenario{
		Name: name, Title: title, Kind: kindLoad, Mode: "echo", FullOnly: fullOnly, Headline: headline,
		Conns: conns, Size: size, Pipeline: 1,
		Load: func(sc Scenario, s Settings, addr string, pid int) []string {
			return []string{"tcpload", "-addr", addr,
				"-conns", strconv.Itoa(sc.Conns), "-size", strconv.Itoa(sc.Size),
				"-pipeline", strconv.Itoa(sc.Pipeline),
				"-warmup", s.warmup.String(), "-duration", s.duration.String(),
				"-server-pid", strconv.Itoa(pid), "-json"}
		},
	}
}

var allScenarios = []Scenario{
	tcpEcho("echo-64B-c64", "TCP echo, 64 B messages, 64 connections", 64, 64, false, true),
	tcpEcho("echo-4KiB-c64", "TCP echo, 4 KiB messages, 64 connections", 64, 4096, false, false),
	tcpEcho("echo-64B-c1", "TCP echo, 64 B messages, 1 connection", 1, 64, true, false),
	tcpEcho("echo-64B-c512", "TCP echo, 64 B messages, 512 connections", 512, 64, true, false),
	{Name: "idle-conns", Title: "Idle connections", Kind: kindIdle, Mode: "echo", Size: 64},
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

func pickScenarios(list string, quick bool) ([]Scenario, error) {
	want := splitList(list)
	if len(want) == 0 {
		var out []Scenario
		for _, s := range allScenarios {
			if !quick || !s.FullOnly {
				out = append(out, s)
			}
		}
		return out, nil
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
