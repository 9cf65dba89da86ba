package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/veloq/veloq/bench/internal/result"
)

func TestParseReport(t *testing.T) {
	out := []byte("Running 2s test @ http://127.0.0.1:1/\n  58505 requests in 2.01s, 6.42MB read\n" +
		`WRKLOAD {"duration_us":2000000,"requests":58000,"bytes":6728075,"connect":1,"read":2,"write":0,"status":3,"timeout":4,"p50":2062.0,"p90":4782.0,"p99":7996.0,"p999":15235.0,"max":18946.0,"mean":2331.7}` + "\n")
	rep, err := parseReport(out)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.load()
	if r.RPS != 29000 || r.WindowS != 2 || r.Requests != 58000 || r.BytesRecv != 6728075 {
		t.Fatalf("totals: %+v", r)
	}
	if r.Errors != 10 || r.DialErrors != 1 || !strings.Contains(r.FirstError, "3 responses >= 400") {
		t.Fatalf("errors: %+v", r)
	}
	if r.Latency.P50 != 2062 || r.Latency.P999 != 15235 || r.Latency.Mean != 2331.7 {
		t.Fatalf("latency: %+v", r.Latency)
	}
	if _, err := parseReport([]byte("Requests/sec: 1\n")); err == nil {
		t.Fatal("output without the report line must fail")
	}
}

func TestWholeSeconds(t *testing.T) {
	for d, want := range map[string]int{"1s": 1, "1500ms": 2, "100ms": 1, "10s": 10} {
		dur, _ := time.ParseDuration(d)
		if got := wholeSeconds(dur); got != want {
			t.Errorf("wholeSeconds(%s) = %d, want %d", d, got, want)
		}
	}
}

func TestRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-addr", "10.1.1.1:80"},
		{"-conns", "0"},
		{"-pipeline", "0"},
		{"-duration", "0s"},
		{"-path", "x"},
		{"-wrk", "/nonexistent/wrk"},
		{"-close", "-pipeline", "2"},
	} {
		if err := run(args, io.Discard, io.Discard); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}

func TestPreflightChecksTheBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "Hello, World!")
	}))
	defer srv.Close()
	if err := preflight(srv.URL+"/", "Hello, World!"); err != nil {
		t.Fatal(err)
	}
	if err := preflight(srv.URL+"/", "something else"); err == nil {
		t.Fatal("a different body must fail")
	}
	if err := preflight(srv.URL+"/missing", ""); err == nil {
		t.Fatal("a 404 must fail")
	}
}

// TestAgainstServer runs the real wrk, pipelined, for one second.
func TestAgainstServer(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk not installed")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "Hello, World!")
	}))
	defer srv.Close()
	var out bytes.Buffer
	addr := strings.TrimPrefix(srv.URL, "http://")
	if err := run([]string{"-addr", addr, "-conns", "4", "-pipeline", "4", "-warmup", "0", "-duration", "1s", "-json"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var r result.Load
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.Bytes())
	}
	if r.Requests == 0 || r.Errors != 0 || r.Pipeline != 4 || r.Latency.P50 <= 0 || r.ClientCPUS <= 0 {
		t.Fatalf("result = %+v", r)
	}
}

// TestAgainstHTTPSWithClose runs the real wrk over TLS with a connection
// per request, for one second, and checks that wrk did reconnect.
func TestAgainstHTTPSWithClose(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk not installed")
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "Hello, World!")
	}))
	defer srv.Close()
	var out bytes.Buffer
	addr := strings.TrimPrefix(srv.URL, "https://")
	if err := run([]string{"-addr", addr, "-tls", "-close", "-conns", "2", "-warmup", "0", "-duration", "1s", "-json"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var r result.Load
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.Bytes())
	}
	if r.Requests == 0 || r.Errors != 0 || !r.TLS || !r.Churn {
		t.Fatalf("result = %+v", r)
	}
	// Other processes may accept connections too: only a lower bound holds.
	if r.PassiveOpens < r.Requests {
		t.Fatalf("%d connections accepted for %d requests: wrk did not reconnect", r.PassiveOpens, r.Requests)
	}
}
