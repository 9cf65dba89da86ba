package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/veloq/veloq/bench/internal/result"
	"github.com/veloq/veloq/bench/internal/selfsigned"
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
		{"-http", "-pipeline", "2"},
		{"-http", "-expect", ""},
		{"-rate", "-1"},
		{"-rate", "100", "-churn"},
		{"-rate", "100", "-pipeline", "2"},
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

// tlsEcho serves TLS echo (crypto/tls, the bench's self-signed
// certificate, session tickets issued as crypto/tls does by default) on a
// loopback port until the test ends, and counts full and resumed
// handshakes.
func tlsEcho(t *testing.T) (addr string, full, resumed *atomic.Int64) {
	t.Helper()
	ln := tlsListener(t)
	full, resumed = countHandshakes(ln)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String(), full, resumed
}

type countingListener struct {
	net.Listener
	cfg *tls.Config
}

// tlsListener listens on 127.0.0.1 with a fresh self-signed certificate;
// it closes when the test ends.
func tlsListener(t *testing.T) *countingListener {
	t.Helper()
	cert, err := selfsigned.New(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	return &countingListener{Listener: tls.NewListener(inner, cfg), cfg: cfg}
}

// countHandshakes counts ln's completed handshakes, full and resumed.
func countHandshakes(ln *countingListener) (full, resumed *atomic.Int64) {
	full, resumed = new(atomic.Int64), new(atomic.Int64)
	ln.cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if cs.DidResume {
			resumed.Add(1)
		} else {
			full.Add(1)
		}
		return nil
	}
	return full, resumed
}

func TestTLSLoadAgainstEcho(t *testing.T) {
	addr, full, _ := tlsEcho(t)
	r := runJSON(t, "-addr", addr, "-tls", "-conns", "4", "-size", "100")
	if !r.TLS || r.Requests == 0 || r.Errors != 0 || r.ConnsOK != 4 {
		t.Fatalf("result = %+v", r)
	}
	if n := full.Load(); n != 4 {
		t.Fatalf("server completed %d handshakes, want 4", n)
	}
}

// Every churned TLS connection is a full handshake, although the server
// issues session tickets a caching client would resume with.
func TestTLSChurnIsAFullHandshakePerRequest(t *testing.T) {
	addr, full, resumed := tlsEcho(t)
	r := runJSON(t, "-addr", addr, "-tls", "-churn", "-conns", "2")
	if !r.Churn || !r.TLS || r.Requests == 0 || r.Errors != 0 {
		t.Fatalf("result = %+v", r)
	}
	if f, res := full.Load(), resumed.Load(); f < r.Requests || res != 0 {
		t.Fatalf("%d full and %d resumed handshakes for %d requests: want a full one each", f, res, r.Requests)
	}
}

// A TLS client against a plaintext server fails loudly instead of
// measuring anything.
func TestTLSAgainstPlaintextFails(t *testing.T) {
	addr, _ := echoServer(t)
	var out bytes.Buffer
	err := run([]string{"-addr", addr, "-tls", "-conns", "2", "-dial-timeout", "1s", "-warmup", "0s", "-duration", "100ms"}, &out)
	if err == nil || !strings.Contains(err.Error(), "no connection") {
		t.Fatalf("err = %v, want no connection opened", err)
	}
}

func TestTLSIdleReportsServerMemory(t *testing.T) {
	addr, full, _ := tlsEcho(t)
	var out bytes.Buffer
	// This process is the server: its RSS is read before and after.
	err := run([]string{"-addr", addr, "-tls", "-idle", "5", "-hold", "100ms", "-server-pid", strconv.Itoa(os.Getpid()), "-json"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var r idleResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("%v: %s", err, out.Bytes())
	}
	if r.ConnsOK != 5 || r.Errors != 0 || !r.TLS || r.ServerRSSBeforeKiB <= 0 || r.ServerRSSAfterKiB <= 0 {
		t.Fatalf("result = %+v", r)
	}
	if n := full.Load(); n != 5 {
		t.Fatalf("server completed %d handshakes, want 5", n)
	}
}

// httpsServer serves GET / with body over TLS, counting handshakes and
// requests.
func httpsServer(t *testing.T, body string) (addr string, full, requests *atomic.Int64) {
	t.Helper()
	ln := tlsListener(t)
	full, _ = countHandshakes(ln)
	requests = new(atomic.Int64)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Write([]byte(body))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), full, requests
}

func TestHTTPSChurnAndKeepAlive(t *testing.T) {
	addr, full, requests := httpsServer(t, "Hello, World!")
	r := runJSON(t, "-addr", addr, "-tls", "-http", "-churn", "-conns", "2")
	if !r.HTTP || r.Requests == 0 || r.Errors != 0 {
		t.Fatalf("churn: result = %+v", r)
	}
	if f, n := full.Load(), requests.Load(); f != n || n < r.Requests {
		t.Fatalf("churn: %d handshakes for %d requests served, %d counted: want one each", f, n, r.Requests)
	}
	before := full.Load()
	r = runJSON(t, "-addr", addr, "-tls", "-http", "-conns", "3")
	if r.Requests == 0 || r.Errors != 0 || r.ConnsOK != 3 {
		t.Fatalf("keep-alive: result = %+v", r)
	}
	if f := full.Load() - before; f != 3 {
		t.Fatalf("keep-alive: %d handshakes, want 3 (one per connection)", f)
	}
}

func TestHTTPWrongBodyIsAMismatch(t *testing.T) {
	addr, _, _ := httpsServer(t, "something else")
	r := runJSON(t, "-addr", addr, "-tls", "-http", "-conns", "1")
	if r.Requests != 0 || r.Mismatches == 0 || !strings.Contains(r.FirstError, "body") {
		t.Fatalf("result = %+v", r)
	}
}

// -rate paces the connections: over the 400 ms window an echo that
// answers at once gets at most the rate's share (plus one slot per
// connection, the window's edges), far fewer than unpaced.
func TestRatePaces(t *testing.T) {
	addr, _ := echoServer(t)
	r := runJSON(t, "-addr", addr, "-conns", "4", "-rate", "200")
	if r.Errors != 0 || r.Requests == 0 || r.Rate != 200 {
		t.Fatalf("result = %+v", r)
	}
	if limit := int64(200*r.WindowS) + 4; r.Requests > limit {
		t.Fatalf("%d requests in %.2f s at -rate 200: want at most %d", r.Requests, r.WindowS, limit)
	}
}
