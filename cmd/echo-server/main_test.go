package main

import (
	"bufio"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/veloq/veloq/internal/backendtest"
)

// The binary starts, says which backend and how many loops, echoes, and
// exits 0 on SIGTERM; also with per-message work, inline and offloaded, and
// with heavy connections and stealing off.
func TestEchoServerBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(backendtest.TempDir(t), "echo-server")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, extra := range [][]string{
		{"-backend", "auto"},
		{"-backend", "epoll", "-loops", "1"}, // the start line says "1 loop"
		{"-work", "3", "-heavy-every", "2"},
		{"-work", "3", "-offload", "-workers", "2", "-heavy-every", "2", "-steal=false"},
	} {
		args := append([]string{"-addr", "127.0.0.1:0", "-loops", "2"}, extra...)
		cmd := exec.Command(bin, args...)
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			t.Fatal(err)
		}
		want := "2 loops"
		if slices.Contains(extra, "-loops") {
			want = "1 loop"
		}
		m := regexp.MustCompile(`on (127\.0\.0\.1:\d+), backend (uring|epoll), ` + want + `,`).FindStringSubmatch(line)
		if m == nil {
			cmd.Process.Kill()
			t.Fatalf("%q: start line %q", extra, line)
		}
		if extra[1] == "epoll" && m[2] != "epoll" {
			t.Errorf("-backend epoll ran %s", m[2])
		}
		// Two connections: with -heavy-every 2 the second is heavy.
		for range 2 {
			c, err := net.Dial("tcp", m[1])
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			c.Write([]byte("veloq"))
			buf := make([]byte, 5)
			if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "veloq" {
				t.Fatalf("%q: echo %q %v", extra, buf, err)
			}
			c.Close()
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%q: exit after SIGTERM: %v", extra, err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%q: no exit after SIGTERM", extra)
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-backend", "kqueue"}, {"-mode", "smtp"}, {"-loops", "0"}, {"-mode", "udp", "-network", "unix"},
		{"-work", "1", "-heavy-every", "-1"},
		{"-work", "1", "-heavy-every", "2", "-heavy-factor", "0"},
		{"-heavy-every", "10"}, // heavy without -work
	} {
		if err := run(args); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}

// Every -heavy-every'th accepted connection costs -heavy-factor times -work;
// the others cost -work.
func TestCostModel(t *testing.T) {
	m := &costModel{work: 3, heavyEvery: 10, heavyFactor: 100}
	for n := 1; n <= 30; n++ {
		want := 3
		if n%10 == 0 {
			want = 300
		}
		if got := m.next().rounds; got != want {
			t.Errorf("connection %d costs %d rounds, want %d", n, got, want)
		}
	}
	none := &costModel{work: 3, heavyFactor: 100}
	for n := 1; n <= 20; n++ {
		if got := none.next().rounds; got != 3 {
			t.Errorf("without -heavy-every, connection %d costs %d rounds", n, got)
		}
	}
}
