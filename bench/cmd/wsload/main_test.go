package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/veloq/veloq/bench/internal/result"
	vhttp "github.com/veloq/veloq/http"
	vnet "github.com/veloq/veloq/net"
	"github.com/veloq/veloq/websocket"
)

// startEcho serves veloq's WebSocket echo on a free loopback port.
func startEcho(t *testing.T) string {
	u := websocket.NewUpgrader()
	echo := &websocket.HandlerFuncs{Message: func(c *websocket.Conn, typ websocket.MessageType, p []byte) { c.WriteMessage(typ, p) }}
	s, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) { u.Upgrade(w, r, echo) }), vhttp.WithNetOptions(vnet.WithLoops(1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s.Addr().String()
}

func TestLoadRun(t *testing.T) {
	addr := startEcho(t)
	for _, size := range []string{"64", "70000"} {
		var out bytes.Buffer
		if err := run([]string{"-addr", addr, "-conns", "2", "-size", size, "-duration", "200ms", "-warmup", "50ms", "-json"}, &out); err != nil {
			t.Fatal(err)
		}
		var r result.Load
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("%v: %s", err, out.Bytes())
		}
		if r.Requests == 0 || r.Errors != 0 || r.ConnsOK != 2 {
			t.Fatalf("size %s: %+v", size, r)
		}
	}
}

func TestIdleRun(t *testing.T) {
	addr := startEcho(t)
	var out bytes.Buffer
	if err := run([]string{"-addr", addr, "-idle", "20", "-hold", "50ms", "-json"}, &out); err != nil {
		t.Fatal(err)
	}
	var r IdleResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.ConnsOK != 20 || r.Errors != 0 {
		t.Fatalf("%+v", r)
	}
}

func TestRefusesNonLoopback(t *testing.T) {
	if err := run([]string{"-addr", "192.0.2.1:80", "-conns", "1"}, &bytes.Buffer{}); err == nil {
		t.Fatal("a non-loopback address was accepted")
	}
}
