package interop

import (
	"context"
	"testing"
	"time"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
	"github.com/veloq/veloq/websocket"
)

// echo sends every message back; "close-me" makes the server close with
// 1001 "bye" instead.
var echo = &websocket.HandlerFuncs{
	Message: func(c *websocket.Conn, typ websocket.MessageType, data []byte) {
		if typ == websocket.TextMessage && string(data) == "close-me" {
			c.Close(websocket.StatusGoingAway, "bye")
			return
		}
		c.WriteMessage(typ, data)
	},
}

// start serves the echo on /ws with compression and the "chat"
// subprotocol available, and returns the ws:// URL and host:port.
func start(t *testing.T, b vnet.Backend) (url, addr string) {
	t.Helper()
	u := websocket.NewUpgrader(
		websocket.WithSubprotocols("chat"),
		websocket.WithCompression(true, 64),
		websocket.WithMessageLimits(4<<20, 8<<20),
	)
	srv, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		u.Upgrade(w, r, echo)
	}), vhttp.WithNetOptions(vnet.WithBackend(b)), vhttp.WithNetOptions(vnet.WithLoops(2)))
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
	addr = srv.Addr().String()
	return "ws://" + addr + "/ws", addr
}

func run(t *testing.T, f func(t *testing.T, url, addr string)) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		url, addr := start(t, b)
		f(t, url, addr)
	})
}

// sizes crosses every length encoding boundary.
var sizes = []int{0, 1, 125, 126, 127, 65535, 65536, 65537, 1 << 20}

func payload(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = 'a' + (byte(i)+seed)%26
	}
	return p
}
