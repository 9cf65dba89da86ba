package main

import (
	"bufio"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The binary starts, forwards to its backend, prints its counters and
// exits 0 on SIGTERM; bad flags are refused with a message.
func TestProxyBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "tcp-proxy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, args := range [][]string{{}, {"-backends", "127.0.0.1:1", "-splice", "sometimes"}, {"-backends", "nohost"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "tcp-proxy:") {
			t.Errorf("%q: exit %v, output %q; want a failure with a message", args, err, out)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	for _, splice := range []string{"off", "always"} {
		cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-backends", ln.Addr().String(), "-loops", "2", "-splice", splice)
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		r := bufio.NewReader(stdout)
		line, err := r.ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			t.Fatal(err)
		}
		m := regexp.MustCompile(`listening on (127\.0\.0\.1:\d+), backends \S+, backend (uring|epoll), 2 loops, splice ` + splice).FindStringSubmatch(line)
		if m == nil {
			cmd.Process.Kill()
			t.Fatalf("start line %q", line)
		}
		c, err := net.Dial("tcp", m[1])
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte("veloq"))
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "veloq" {
			t.Fatalf("echo through the proxy: %q %v", buf, err)
		}
		c.Close()
		go func() { done <- cmd.Wait() }()
		cmd.Process.Signal(syscall.SIGTERM)
		rest, _ := io.ReadAll(r)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exit after SIGTERM: %v", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatal("no exit after SIGTERM")
		}
		if !regexp.MustCompile(`stopping: 1 accepted, \d+ active, 1 connected, 0 dial failures`).Match(rest) {
			t.Errorf("stop line %q", rest)
		}
	}
}
