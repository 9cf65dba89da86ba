package prometheus

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	nethttp "net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
	"github.com/veloq/veloq/websocket"
)

// startHTTP serves h on 127.0.0.1 with backend b; the server is shut down
// at cleanup.
func startHTTP(t *testing.T, b vnet.Backend, h vhttp.Handler) *vhttp.Server {
	t.Helper()
	s, err := vhttp.NewServer(h, vhttp.WithNetOptions(vnet.WithBackend(b)), vhttp.WithNetOptions(vnet.WithLoops(1)),
		vhttp.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s
}

// TestHTTPCollector checks, on both backends, that requests, a protocol
// error and the connections are counted, with the server's loops.
func TestHTTPCollector(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		s := startHTTP(t, b, vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
			w.WriteString("ok")
		}))
		reg := register(t, NewHTTPCollector(s))
		require.Error(t, reg.Register(NewNetCollector(s.NetServer())), "the loops' series are the HTTP collector's already")

		c := dial(t, s.Addr().String())
		br := bufio.NewReader(c)
		for range 3 {
			_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			require.NoError(t, err)
			resp, err := nethttp.ReadResponse(br, nil)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, "ok", string(body))
		}
		eventually(t, reg, "veloq_http_requests_total", equals(3), "three requests")
		eventually(t, reg, "veloq_http_accepted_connections_total", equals(1), "one connection")
		eventually(t, reg, "veloq_http_connections", equals(1), "one open")
		eventually(t, reg, "veloq_net_accepted_connections_total", equals(1), "the loop saw it too")

		bad := dial(t, s.Addr().String())
		_, err := io.WriteString(bad, "GET / HTTP/9.9 junk\r\n\r\n")
		require.NoError(t, err)
		resp, err := nethttp.ReadResponse(bufio.NewReader(bad), nil)
		require.NoError(t, err)
		require.GreaterOrEqual(t, resp.StatusCode, 400)
		eventually(t, reg, "veloq_http_protocol_errors_total", equals(1), "one rejected request")

		require.NoError(t, c.Close())
		require.NoError(t, bad.Close())
		eventually(t, reg, "veloq_http_connections", equals(0), "none open")
		requireLines(t, scrape(t, reg),
			"# TYPE veloq_http_requests_total counter",
			"# TYPE veloq_http_connections gauge",
			"veloq_http_requests_total 3",
		)
	})
}

// wsUpgrade sends a WebSocket handshake for /ws and returns the status
// line of the answer, leaving the reader after the head.
func wsUpgrade(t *testing.T, br *bufio.Reader, w io.Writer, upgrade bool) string {
	t.Helper()
	req := "GET /ws HTTP/1.1\r\nHost: x\r\n"
	if upgrade {
		req += "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	}
	_, err := io.WriteString(w, req+"\r\n")
	require.NoError(t, err)
	status, err := br.ReadString('\n')
	require.NoError(t, err)
	for {
		l, err := br.ReadString('\n')
		require.NoError(t, err)
		if l == "\r\n" {
			return strings.TrimSpace(status)
		}
	}
}

// TestWebSocketCollectors checks, on both backends, the upgrader's and a
// broadcast group's series after a real handshake, a rejected one, a
// broadcast and a connection dropped without a close handshake.
func TestWebSocketCollectors(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		u := websocket.NewUpgrader()
		g := websocket.NewGroup()
		h := &websocket.HandlerFuncs{Open: g.Add, Close: func(c *websocket.Conn, _ error) { g.Remove(c) }}
		s := startHTTP(t, b, vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) { u.Upgrade(w, r, h) }))
		reg := register(t, NewWebSocketCollector(u))
		require.NoError(t, reg.Register(NewGroupCollector(g)))

		c := dial(t, s.Addr().String())
		br := bufio.NewReader(c)
		require.Equal(t, "HTTP/1.1 101 Switching Protocols", wsUpgrade(t, br, c, true))
		eventually(t, reg, "veloq_websocket_upgrades_total", equals(1), "one upgrade")
		eventually(t, reg, "veloq_websocket_connections", equals(1), "one open")
		eventually(t, reg, "veloq_websocket_group_members", equals(1), "joined the group")

		require.NoError(t, g.Broadcast(websocket.TextMessage, []byte("hi")))
		frame := make([]byte, 4) // FIN+text, length 2, "hi": unmasked from a server
		_, err := io.ReadFull(br, frame)
		require.NoError(t, err)
		require.Equal(t, []byte{0x81, 2, 'h', 'i'}, frame)
		eventually(t, reg, "veloq_websocket_group_sent_messages_total", equals(1), "one message sent")

		plain := dial(t, s.Addr().String())
		status := wsUpgrade(t, bufio.NewReader(plain), plain, false)
		require.True(t, strings.HasPrefix(status, "HTTP/1.1 4"), status)
		eventually(t, reg, "veloq_websocket_rejected_upgrades_total", equals(1), "one rejected")

		require.NoError(t, c.Close()) // no close handshake
		eventually(t, reg, "veloq_websocket_abnormal_closes_total", equals(1), "one abnormal end")
		eventually(t, reg, "veloq_websocket_connections", equals(0), "none open")
		eventually(t, reg, "veloq_websocket_group_members", equals(0), "left the group")
	})
}
