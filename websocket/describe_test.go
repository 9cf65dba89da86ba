package websocket

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// slowWSHandler blocks the loop in OnMessage: the stall under test.
type slowWSHandler struct{ HandlerFuncs }

func (h *slowWSHandler) OnMessage(c *Conn, typ MessageType, data []byte) {
	time.Sleep(150 * time.Millisecond)
	c.WriteMessage(typ, data)
}

// TestBlockedLoopNamesWSHandler: a websocket handler that blocks the loop
// is named by its own type in the warning, not by the package's adapter.
func TestBlockedLoopNamesWSHandler(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		var logs backendtest.Buffer
		u := NewUpgrader(WithLogger(testLogger(t)))
		h := &slowWSHandler{}
		srv, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
			u.Upgrade(w, r, h)
		}), vhttp.WithNetOptions(vnet.WithBackend(b)), vhttp.WithNetOptions(vnet.WithLoops(1)),
			vhttp.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
			vhttp.WithNetOptions(vnet.WithLoopConfig(vnet.Config{BlockThreshold: 20 * time.Millisecond})))
		if err != nil {
			t.Fatal(err)
		}
		_, err = srv.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
		})
		c := dialWS(t, srv.Addr().String())
		c.send(OpText, true, []byte("hi"))
		f := c.mustRead()
		require.Equal(t, "hi", string(f.payload))
		require.Eventually(t, func() bool { return strings.Contains(logs.String(), "blocked the loop") },
			5*time.Second, 5*time.Millisecond)
		require.Contains(t, logs.String(), `callback="OnData of websocket handler *websocket.slowWSHandler"`)
	})
}
