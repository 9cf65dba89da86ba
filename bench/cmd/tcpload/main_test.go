package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestLoopbackAddr(t *testing.T) {
	ok := map[string]string{
		"127.0.0.1:9000":       "127.0.0.1:9000",
		"127.1.2.3:80":         "127.1.2.3:80",
		"[::1]:9000":           "[::1]:9000",
		"localhost:9000":       "127.0.0.1:9000",
		"[::ffff:127.0.0.1]:1": "[::ffff:127.0.0.1]:1",
	}
	for in, want := range ok {
		got, err := loopbackAddr(in)
		if err != nil || got != want {
			t.Errorf("loopbackAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"10.0.0.1:80", "192.168.1.1:9000", "8.8.8.8:53", "example.com:80", "[2001:db8::1]:80", "0.0.0.0:9000", "9000"} {
		if _, err := loopbackAddr(in); err == nil {
			t.Errorf("loopbackAddr(%q) accepted a non-loopback address", in)
		}
	}
	if _, err := loopbackAddr("10.0.0.1:80"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("error should say why: %v", err)
	}
}

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
		{"extra"},
	} {
		if err := run(args, &out); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}
