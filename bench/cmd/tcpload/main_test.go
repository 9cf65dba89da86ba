package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/veloq/veloq/bench/internal/result"
)

func TestMessagesDiffer(t *testing.T) {
	p := makePattern(64)
	a, b := message(p, 0, 0, 64), message(p, 0, 1, 64)
	if len(a) != 64 || bytes.Equal(a, b) {
		t.Fatal("consecutive messages must differ")
	}
	if !bytes.Equal(message(p, 3, 5, 64), message(p, 3, 5+256, 64)) {
		t.Fatal("the pattern repeats every 256 messages")
	}
	if bytes.Equal(message(p, 1, 0, 64), message(p, 2, 0, 64)) {
		t.Fatal("connections start at different offsets")
	}
}

func TestRejectsBadFlags(t *testing.T) {
	var out bytes.Buffer
	for _, args := range [][]string{
		{"-addr", "10.1.1.1:9000"},
		{"-size", "0"},
		{"-pipeline", "0"},
		{"-duration", "0s"},
		{"-conns", "0"},
		{"-churn", "-pipeline", "2"},
		{"-churn", "-idle", "5"},
		{"extra"},
	} {
		if err := run(args, &out); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}

// echoServer serves TCP echo on a loopback port until the test ends and
// counts the connections it accepted.
func echoServer(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String(), accepted
}

func runJSON(t *testing.T, args ...string) result.Load {
	t.Helper()
	var out bytes.Buffer
	if err := run(append(args, "-json", "-warmup", "100ms", "-duration", "400ms"), &out); err != nil {
		t.Fatal(err)
	}
	var r result.Load
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.Bytes())
	}
	return r
}

func TestLoadAgainstEcho(t *testing.T) {
	addr, accepted := echoServer(t)
	r := runJSON(t, "-addr", addr, "-conns", "4", "-size", "100", "-pipeline", "3")
	if r.Requests == 0 || r.Errors != 0 || r.ConnsOK != 4 || r.Latency.P50 <= 0 {
		t.Fatalf("result = %+v", r)
	}
	if n := accepted.Load(); n != 4 {
		t.Fatalf("server accepted %d connections, want 4", n)
	}
}

func TestChurnOpensAConnectionPerRequest(t *testing.T) {
	addr, accepted := echoServer(t)
	r := runJSON(t, "-addr", addr, "-churn", "-conns", "3")
	if !r.Churn || r.Requests == 0 || r.Errors != 0 || r.Latency.P50 <= 0 {
		t.Fatalf("result = %+v", r)
	}
	// Every request in the window had its own connection; warmup and
	// drain add more.
	if n := accepted.Load(); n < r.Requests {
		t.Fatalf("server accepted %d connections for %d requests", n, r.Requests)
	}
}

func TestChurnCountsRefusedConnects(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	r := runJSON(t, "-addr", addr, "-churn", "-conns", "2")
	if r.Requests != 0 || r.DialErrors == 0 || r.Errors < r.DialErrors || r.FirstError == "" {
		t.Fatalf("result = %+v", r)
	}
}
