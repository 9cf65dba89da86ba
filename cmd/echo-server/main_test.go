package main

import (
	"bufio"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// The binary starts, says which backend and how many loops, echoes, and
// exits 0 on SIGTERM.
func TestEchoServerBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "echo-server")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, backend := range []string{"auto", "epoll"} {
		cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-loops", "2", "-backend", backend)
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
		m := regexp.MustCompile(`on (127\.0\.0\.1:\d+), backend (uring|epoll), 2 loops`).FindStringSubmatch(line)
		if m == nil {
			cmd.Process.Kill()
			t.Fatalf("start line %q", line)
		}
		if backend == "epoll" && m[2] != "epoll" {
			t.Errorf("-backend epoll ran %s", m[2])
		}
		c, err := net.Dial("tcp", m[1])
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte("veloq"))
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "veloq" {
			t.Fatalf("echo %q %v", buf, err)
		}
		c.Close()
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exit after SIGTERM: %v", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatal("no exit after SIGTERM")
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-backend", "kqueue"}, {"-mode", "smtp"}, {"-loops", "0"}} {
		if err := run(args); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}
