package http

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// upperEcho is what a hijacked connection turns into: a line protocol that
// answers every byte upper-cased.
func upperEcho(opened chan<- struct{}) vnet.Handler {
	return &vnet.HandlerFuncs{
		Open: func(c *vnet.Conn) { close(opened) },
		Data: func(c *vnet.Conn) {
			b, _ := c.Next(-1)
			c.Write(bytes.ToUpper(b))
		},
	}
}

func TestHijackHandsConnectionOver(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		opened := make(chan struct{})
		s := startServer(t, b, HandlerFunc(func(w *ResponseWriter, r *Request) {
			if string(r.Path) != "/upgrade" {
				w.WriteString("plain")
				return
			}
			w.WriteHeader(StatusSwitchingProtocols)
			w.Header().Set("Upgrade", "upper")
			w.Header().Set("Connection", "Upgrade")
			if err := w.Hijack(upperEcho(opened)); err != nil {
				t.Errorf("Hijack: %v", err)
			}
		}))
		conn, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		// The bytes after the request arrive in the same segment: they must
		// reach the new handler, not the HTTP parser.
		_, err = io.WriteString(conn, "GET /upgrade HTTP/1.1\r\nHost: x\r\nUpgrade: upper\r\nConnection: Upgrade\r\n\r\nhello ")
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		status, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(status, "HTTP/1.1 101 ") {
			t.Fatalf("status line %q, %v", status, err)
		}
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(strings.ToLower(line), "content-length") {
				t.Errorf("101 carries %q", line)
			}
			if line == "\r\n" {
				break
			}
		}
		<-opened
		if _, err := io.WriteString(conn, "world\r\nGET / HTTP/1.1\r\n"); err != nil {
			t.Fatal(err)
		}
		want := "HELLO WORLD\r\nGET / HTTP/1.1\r\n"
		got := make([]byte, len(want))
		if _, err := io.ReadFull(br, got); err != nil {
			t.Fatalf("read %q: %v", got, err)
		}
		if string(got) != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		if st := s.Stats(); st.Hijacked != 1 || st.Conns != 0 {
			t.Fatalf("stats after hijack: %+v", st)
		}
	})
}

func TestHijackOffloadedRefused(t *testing.T) {
	w := &ResponseWriter{off: true}
	if err := w.Hijack(&vnet.HandlerFuncs{}); err != ErrHijackUnavailable {
		t.Fatalf("got %v, want ErrHijackUnavailable", err)
	}
}
