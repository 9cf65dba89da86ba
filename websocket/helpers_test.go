package websocket

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// testLogger is the shared test logger (backendtest.Logger).
func testLogger(t testing.TB) *slog.Logger { return backendtest.Logger(t) }

// events records what a server-side Handler saw, for assertions from
// the test goroutine.
type events struct {
	mu     sync.Mutex
	opened int
	msgs   []string
	closes []error
	conns  []*Conn
}

func (e *events) closeErrs() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.closes...)
}

func (e *events) openCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.opened
}

// echoHandler echoes every message with its type and records events.
// Text "close-me" makes the server start the close handshake instead.
func echoHandler(ev *events) *HandlerFuncs {
	return &HandlerFuncs{
		Open: func(c *Conn) {
			ev.mu.Lock()
			ev.opened++
			ev.conns = append(ev.conns, c)
			ev.mu.Unlock()
		},
		Message: func(c *Conn, typ MessageType, data []byte) {
			ev.mu.Lock()
			ev.msgs = append(ev.msgs, string(data))
			ev.mu.Unlock()
			if typ == TextMessage && string(data) == "close-me" {
				c.Close(StatusGoingAway, "bye")
				return
			}
			c.WriteMessage(typ, data)
		},
		Close: func(c *Conn, err error) {
			ev.mu.Lock()
			ev.closes = append(ev.closes, err)
			ev.mu.Unlock()
		},
	}
}

// startWS serves WebSocket on /ws (everything else answers "plain") with
// an Upgrader built from opts and the handler h.
func startWS(t testing.TB, b vnet.Backend, h Handler, opts ...Option) (*vhttp.Server, *Upgrader) {
	t.Helper()
	u := NewUpgrader(append([]Option{WithLogger(testLogger(t))}, opts...)...)
	srv := vhttpServer(t, b, func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		if string(r.Path) != "/ws" {
			w.WriteString("plain")
			return
		}
		u.Upgrade(w, r, h)
	})
	return srv, u
}

// vhttpServer serves f on a free loopback port until the test ends.
func vhttpServer(t testing.TB, b vnet.Backend, f vhttp.HandlerFunc) *vhttp.Server {
	t.Helper()
	srv, err := vhttp.NewServer(f, vhttp.WithNetOptions(vnet.WithBackend(b)), vhttp.WithNetOptions(vnet.WithLoops(2)), vhttp.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return srv
}

// wsClient is a minimal WebSocket client for the tests: it writes any
// frame, valid or not, and reads the server's frames with a Decoder.
type wsClient struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader
	dec  Decoder
	buf  []byte
	resp string // the handshake response head
}

// frame is one frame read from the server.
type frame struct {
	op      Opcode
	fin     bool
	payload []byte
	code    StatusCode
	reason  string
}

// rawDial connects without a handshake.
func rawDial(t testing.TB, addr string) *wsClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	return &wsClient{t: t, conn: conn, br: bufio.NewReader(conn), dec: Decoder{FromServer: true, Deflate: true, WaitLimit: 1 << 30}}
}

// handshake sends a GET /ws upgrade request with extra header lines and
// returns the status code and the response head.
func (c *wsClient) handshake(extra ...string) (int, string) {
	c.t.Helper()
	var key [16]byte
	rand.Read(key[:])
	k := base64.StdEncoding.EncodeToString(key[:])
	req := "GET /ws HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + k + "\r\n"
	for _, e := range extra {
		req += e + "\r\n"
	}
	_, err := io.WriteString(c.conn, req+"\r\n")
	require.NoError(c.t, err)
	status, head := c.readHead()
	if status == 101 {
		require.Contains(c.t, head, "\r\nSec-WebSocket-Accept: "+AcceptKey(k)+"\r\n")
	}
	c.resp = head
	return status, head
}

// readHead reads an HTTP response head (and skips a Content-Length body).
func (c *wsClient) readHead() (int, string) {
	c.t.Helper()
	var sb strings.Builder
	cl := 0
	for {
		line, err := c.br.ReadString('\n')
		require.NoError(c.t, err, "reading the response head")
		sb.WriteString(line)
		if l := strings.ToLower(line); strings.HasPrefix(l, "content-length:") {
			for _, ch := range strings.TrimSpace(l[len("content-length:"):]) {
				cl = cl*10 + int(ch-'0')
			}
		}
		if line == "\r\n" {
			break
		}
	}
	head := sb.String()
	io.CopyN(io.Discard, c.br, int64(cl))
	var status int
	for _, ch := range head[9:12] {
		status = status*10 + int(ch-'0')
	}
	return status, head
}

// dialWS connects and completes the handshake.
func dialWS(t testing.TB, addr string, extra ...string) *wsClient {
	t.Helper()
	c := rawDial(t, addr)
	status, head := c.handshake(extra...)
	require.Equal(t, 101, status, head)
	return c
}

// write sends raw bytes.
func (c *wsClient) write(b []byte) {
	c.t.Helper()
	_, err := c.conn.Write(b)
	require.NoError(c.t, err)
}

// send writes one masked frame.
func (c *wsClient) send(op Opcode, fin bool, payload []byte) {
	c.t.Helper()
	c.write(mustMasked(op, fin, 0, payload))
}

// read returns the next frame from the server (whole; server frames are
// never fragmented by this package), or an error such as io.EOF.
func (c *wsClient) read() (frame, error) {
	for {
		if len(c.buf) > 0 {
			ch, n, err := c.dec.Next(c.buf)
			if err == nil {
				f := frame{op: ch.Opcode, fin: ch.Final, payload: append([]byte(nil), ch.Payload...),
					code: ch.CloseCode, reason: string(ch.CloseReason)}
				c.buf = c.buf[n:]
				return f, nil
			}
			if err != ErrNeedMore {
				return frame{}, err
			}
		}
		var tmp [64 << 10]byte
		n, err := c.br.Read(tmp[:])
		c.buf = append(c.buf, tmp[:n]...)
		if err != nil && n == 0 {
			return frame{}, err
		}
	}
}

// mustRead reads a frame and fails the test on error.
func (c *wsClient) mustRead() frame {
	c.t.Helper()
	f, err := c.read()
	require.NoError(c.t, err)
	return f
}

// expectClose reads until a close frame with code (frames before it, such
// as echoes, are skipped) and then the TCP close.
func (c *wsClient) expectClose(code StatusCode) frame {
	c.t.Helper()
	for {
		f, err := c.read()
		require.NoError(c.t, err, "want a close frame with %d", code)
		if f.op != OpClose {
			continue
		}
		require.Equal(c.t, code, f.code, "close reason %q", f.reason)
		c.expectEOF()
		return f
	}
}

// expectEOF checks that the server closes the TCP connection, then closes
// the client's side, as a client does once it sees the server's FIN
// (RFC 6455 §7.1.1): a server lingering after its close frame closes on
// that FIN, so the handler's OnClose follows at once.
func (c *wsClient) expectEOF() {
	c.t.Helper()
	_, err := c.read()
	require.Error(c.t, err)
	require.True(c.t, errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset"), "got %v", err)
	c.conn.Close()
}
