package main

// The floor: minimal single-threaded C servers that do the least a server
// can do on this kernel (no validation, no buffering policy, no runtime),
// so their server CPU per request is the lowest this machine reaches. Their
// C sources are vendored in bench/floor/: benchrun compiles them with gcc
// from that directory (or another given by -limits) into bin/ at the start
// of a run, and skips them, saying how to get what is missing, when it
// cannot.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The floor servers' names.
const (
	floorEpoll = "c-epoll" // epoll echo, and the epoll HTTP server
	floorURing = "c-uring" // io_uring echo
)

// floorApt is what a Debian machine needs to build every floor server.
const floorApt = "apt-get install gcc liburing-dev"

// defaultLimits is where the C sources are looked for by default, relative
// to veloq's root: the copies vendored in the bench module.
const defaultLimits = "bench/floor"

// cProgram is one floor server: a single C source file in the limits
// directory, built with gcc -O2 into bin/ under the file's name without ".c".
type cProgram struct {
	Src     string   // file name in the limits directory
	Libs    []string // linker flags after the source
	Headers []string // headers beyond libc it includes, checked before building
}

func (p cProgram) bin() string { return strings.TrimSuffix(p.Src, ".c") }

var (
	epollEcho = cProgram{Src: "epoll_echo.c"}
	uringEcho = cProgram{Src: "uring_echo.c", Libs: []string{"-luring"}, Headers: []string{"/usr/include/liburing.h"}}
	epollHTTP = cProgram{Src: "epoll_http.c"}
)

// floorServer declares a floor server serving each mode of progs with its
// program. Floor servers print nothing (Quiet) and run only in the echo and
// HTTP groups, where the report sets every server against them.
func floorServer(name, what string, progs map[string]cProgram) Server {
	var modes []string
	for m := range progs {
		modes = append(modes, m)
	}
	slices.Sort(modes)
	return Server{Name: name, What: what, Modes: modes, Groups: []string{"echo", "http"}, Quiet: true, Programs: progs,
		Args: func(sc Scenario, addr, _ string) ([]string, error) {
			p, ok := progs[sc.Mode]
			if !ok {
				return nil, fmt.Errorf("no C program for mode %q", sc.Mode)
			}
			return []string{p.bin(), "-addr", addr}, nil
		}}
}

// programs lists srv's C programs in a stable order.
func (srv Server) programs() []cProgram {
	var ps []cProgram
	for _, m := range srv.Modes {
		if p, ok := srv.Programs[m]; ok && !slices.ContainsFunc(ps, func(q cProgram) bool { return q.Src == p.Src }) {
			ps = append(ps, p)
		}
	}
	return ps
}

// floorMissing says why srv cannot be built from limitsDir on this machine
// ("" = it can). Without building (-no-build) it says whether bin/ holds
// its binaries instead.
func floorMissing(srv Server, limitsDir, binDir string, build bool) string {
	if !build {
		for _, p := range srv.programs() {
			if _, err := os.Stat(filepath.Join(binDir, p.bin())); err != nil {
				return fmt.Sprintf("%s is not in %s and -no-build was given", p.bin(), binDir)
			}
		}
		return ""
	}
	if fi, err := os.Stat(limitsDir); err != nil || !fi.IsDir() {
		return fmt.Sprintf("no C floor sources: %s is not a directory (pass -limits DIR; building them needs %s)", limitsDir, floorApt)
	}
	for _, p := range srv.programs() {
		if _, err := os.Stat(filepath.Join(limitsDir, p.Src)); err != nil {
			return fmt.Sprintf("%s not found in %s (pass -limits DIR; building needs %s)", p.Src, limitsDir, floorApt)
		}
	}
	for _, p := range srv.programs() {
		for _, h := range p.Headers {
			if _, err := os.Stat(h); err != nil {
				return fmt.Sprintf("%s not found, %s needs it: %s", h, p.Src, floorApt)
			}
		}
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		return "gcc not found: " + floorApt
	}
	return ""
}

// withFloor returns a copy of srvs in which every floor server's Missing
// checks whether it can be built from limitsDir (or, without building,
// whether bin/ already holds it).
func withFloor(srvs []Server, limitsDir, binDir string, build bool) []Server {
	out := slices.Clone(srvs)
	for i, srv := range out {
		if srv.Programs != nil {
			out[i].Missing = func() string { return floorMissing(srv, limitsDir, binDir, build) }
		}
	}
	return out
}

// buildFloor compiles the C programs of the floor servers in plans from
// limitsDir into binDir. A server whose program does not compile is taken
// out of every plan, and a message says why; the rest of the run goes on.
func buildFloor(ctx context.Context, plans []planned, limitsDir, binDir string, progress func(string, ...any)) ([]planned, []string) {
	failed := map[string]string{} // server -> why
	built := map[string]error{}   // source -> outcome
	for _, p := range plans {
		for _, srv := range p.servers {
			if _, done := failed[srv.Name]; done {
				continue
			}
			for _, prog := range srv.programs() {
				err, done := built[prog.Src]
				if !done {
					args := append([]string{"-O2", "-o", filepath.Join(binDir, prog.bin()), filepath.Join(limitsDir, prog.Src)}, prog.Libs...)
					progress("build: gcc %s", strings.Join(args, " "))
					out, cerr := exec.CommandContext(ctx, "gcc", args...).CombinedOutput()
					if cerr != nil {
						err = fmt.Errorf("gcc %s: %w: %s", prog.Src, cerr, gccError(out))
					}
					built[prog.Src] = err
				}
				if err != nil {
					failed[srv.Name] = err.Error()
					break
				}
			}
		}
	}
	if len(failed) == 0 {
		return plans, nil
	}
	var notes []string
	for _, srv := range slices.Sorted(maps.Keys(failed)) {
		notes = append(notes, fmt.Sprintf("server %s skipped: %s", srv, failed[srv]))
	}
	var out []planned
	for _, p := range plans {
		p.servers = slices.DeleteFunc(slices.Clone(p.servers), func(s Server) bool { _, bad := failed[s.Name]; return bad })
		if len(p.servers) > 0 {
			out = append(out, p)
		}
	}
	return out, notes
}

// gccError picks the first error line of gcc's output (a warning may come first).
func gccError(b []byte) string {
	s := strings.TrimSpace(string(b))
	for l := range strings.Lines(s) {
		if strings.Contains(l, "error") {
			return strings.TrimSpace(l)
		}
	}
	if l, _, _ := strings.Cut(s, "\n"); l != "" {
		return l
	}
	return "(no output)"
}
