package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
	"github.com/veloq/veloq/websocket"
)

// wsTestClient speaks just enough WebSocket for these tests, with the
// websocket package's codec.
type wsTestClient struct {
	conn net.Conn
	br   *bufio.Reader
	dec  websocket.Decoder
	buf  []byte
}

func wsDial(t *testing.T, addr, path string) *wsTestClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	const key = "dGhlIHNhbXBsZSBub25jZQ=="
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n", path, key)
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(status, "HTTP/1.1 101 "), status)
	sawAccept := false
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if line == "\r\n" {
			break
		}
		if line == "Sec-WebSocket-Accept: "+websocket.AcceptKey(key)+"\r\n" {
			sawAccept = true
		}
	}
	require.True(t, sawAccept)
	return &wsTestClient{conn: conn, br: br, dec: websocket.Decoder{FromServer: true}}
}

func (c *wsTestClient) send(t *testing.T, op websocket.Opcode, p []byte) {
	h := websocket.Header{Fin: true, Opcode: op, Masked: true, Mask: [4]byte{9, 8, 7, 6}, Length: int64(len(p))}
	b := websocket.AppendHeader(nil, &h)
	n := len(b)
	b = append(b, p...)
	websocket.MaskBytes(h.Mask, 0, b[n:])
	_, err := c.conn.Write(b)
	require.NoError(t, err)
}

func (c *wsTestClient) recv(t *testing.T) (websocket.Opcode, []byte) {
	for {
		if ch, n, err := c.dec.Next(c.buf); err == nil {
			c.buf = c.buf[n:]
			return ch.Opcode, append([]byte(nil), ch.Payload...)
		} else if err != websocket.ErrNeedMore {
			t.Fatal(err)
		}
		var tmp [4096]byte
		n, err := c.br.Read(tmp[:])
		require.NoError(t, err)
		c.buf = append(c.buf, tmp[:n]...)
	}
}

// checkWSMode checks -mode ws's behaviour against addr: echo with the
// same opcode on any path, and plain HTTP answers beside it.
func checkWSMode(t *testing.T, addr string) {
	for _, path := range []string{"/", "/ws", "/any/path?x=1"} {
		c := wsDial(t, addr, path)
		c.send(t, websocket.OpText, []byte("text on "+path))
		op, p := c.recv(t)
		require.Equal(t, websocket.OpText, op)
		require.Equal(t, "text on "+path, string(p))
		c.send(t, websocket.OpBinary, []byte{0, 1, 2, 0xff})
		op, p = c.recv(t)
		require.Equal(t, websocket.OpBinary, op)
		require.Equal(t, []byte{0, 1, 2, 0xff}, p)
		c.send(t, websocket.OpClose, []byte{0x03, 0xe8})
		op, _ = c.recv(t)
		require.Equal(t, websocket.OpClose, op)
	}
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	resp, _ := io.ReadAll(conn)
	require.True(t, strings.HasPrefix(string(resp), "HTTP/1.1 200 "), string(resp))
	require.True(t, strings.HasSuffix(string(resp), "\r\n\r\n"+helloBody), string(resp))
}

func TestWSModeHandler(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		s, err := vhttp.NewServer(wsHandler(websocket.NewUpgrader()), vhttp.WithNetOptions(vnet.WithBackend(b)), vhttp.WithNetOptions(vnet.WithLoops(2)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s.Shutdown(ctx)
		}()
		checkWSMode(t, s.Addr().String())
	})
}

// The binary in -mode ws: start line, echo, hello, clean exit on SIGTERM.
func TestWSModeBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(backendtest.TempDir(t), "echo-server")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-loops", "2", "-mode", "ws", "-ws-compress")
	stdout, _ := cmd.StdoutPipe()
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	m := regexp.MustCompile(`websocket echo with permessage-deflate \(and http\) on (127\.0\.0\.1:\d+), backend (uring|epoll), 2 loops`).FindStringSubmatch(line)
	require.NotNil(t, m, "start line %q", line)
	checkWSMode(t, m[1])
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
}
