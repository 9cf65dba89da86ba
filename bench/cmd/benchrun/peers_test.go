package main

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPeersServe builds every Go peer benchrun runs (the binaries their
// Args name) and checks that each answers on loopback as the scenarios
// expect, in every mode it serves: TCP echo byte for byte, HTTP with two
// pipelined keep-alive GET / answered with the hello body, then a request
// sent in two writes, and on a new connection a request asking to close
// it.
func TestPeersServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every peer")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the peers:", err)
	}
	bin := t.TempDir()
	var peers []Server
	var pkgs []string
	for _, srv := range allServers {
		if srv.Peer == "" || srv.Name == "nginx" {
			continue
		}
		peers = append(peers, srv)
		for _, mode := range srv.Modes {
			args, err := srv.Args(Scenario{Mode: mode, Work: 1}, "127.0.0.1:1", "")
			if err != nil {
				t.Fatal(err)
			}
			if p := "./peers/" + args[0]; !slices.Contains(pkgs, p) {
				pkgs = append(pkgs, p)
			}
		}
	}
	build := exec.Command("go", append([]string{"build", "-o", bin + "/"}, pkgs...)...)
	build.Dir = "../.."
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	for _, srv := range peers {
		for _, mode := range srv.Modes {
			t.Run(srv.Name+"/"+mode, func(t *testing.T) {
				addr := startTestServer(t, srv, mode, bin)
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				switch mode {
				case modeHTTP:
					checkHello(t, c)
					checkSplitRequest(t, c)
					checkConnectionClose(t, addr)
				default:
					checkEcho(t, c)
				}
			})
		}
	}
}

// checkSplitRequest sends one GET / in two writes, cut inside the head, and
// expects one answer with the hello body.
func checkSplitRequest(t *testing.T, c net.Conn) {
	t.Helper()
	for _, part := range []string{"GET / HTTP/1.1\r\nHo", "st: x\r\n\r\n"} {
		if _, err := io.WriteString(c, part); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(c)
	status, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Fatalf("split request: status %q, %v", status, err)
	}
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if l == "\r\n" {
			break
		}
	}
	body := make([]byte, len(helloBody))
	if _, err := io.ReadFull(r, body); err != nil || string(body) != helloBody {
		t.Fatalf("split request: body %q, %v", body, err)
	}
}

// checkConnectionClose sends one GET / with "Connection: close" on a new
// connection and expects the hello answer, then the end of the stream.
func checkConnectionClose(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(c) // ends only when the server closes
	if err != nil {
		t.Fatalf("Connection: close: %v after %q", err, all)
	}
	if !strings.HasPrefix(string(all), "HTTP/1.1 200") || !strings.HasSuffix(string(all), helloBody) {
		t.Fatalf("Connection: close: got %q", all)
	}
}
