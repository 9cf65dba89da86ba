package websocket

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// The HTTP server's Shutdown closes WebSocket connections with 1001 (going
// away) and waits for their close handshakes: a client that answers ends
// gracefully (drained); one that never answers is cut at Shutdown's
// deadline. A handler's own OnShutdown runs first.
func TestShutdownGoingAway(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		told := make(chan *Conn, 2)
		h := &shutdownHandler{HandlerFuncs: *echoHandler(&events{}), told: told}
		srv, u := startWS(t, b, h, WithCloseHandshakeTimeout(time.Minute))
		answers, silent := dialWS(t, srv.Addr().String()), dialWS(t, srv.Addr().String())
		require.Eventually(t, func() bool { return u.Stats().Open == 2 }, 10*time.Second, time.Millisecond)

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		shut := make(chan error, 1)
		go func() { shut <- srv.Shutdown(ctx) }()

		for _, c := range []*wsClient{answers, silent} {
			f := c.mustRead()
			require.Equal(t, OpText, f.op, "the handler's OnShutdown message comes first")
			require.Equal(t, "last words", string(f.payload))
			f = c.mustRead()
			require.Equal(t, OpClose, f.op)
			require.Equal(t, StatusGoingAway, f.code)
		}
		answers.send(OpClose, true, closePayload(1001, ""))
		answers.expectEOF()
		require.Eventually(t, func() bool { return u.Stats().Drained == 1 }, 10*time.Second, time.Millisecond)
		select {
		case err := <-shut:
			t.Fatalf("Shutdown returned %v before the close handshakes ended", err)
		default:
		}
		cancel() // the drain timeout
		require.ErrorIs(t, <-shut, context.Canceled)
		_, err := silent.read()
		require.Error(t, err)
		st := u.Stats()
		require.EqualValues(t, 2, st.GoingAway)
		require.EqualValues(t, 1, st.Drained)
		require.EqualValues(t, 1, st.Cut)
		require.Len(t, told, 2)
	})
}

// shutdownHandler is a ShutdownHandler that sends a last message.
type shutdownHandler struct {
	HandlerFuncs
	told chan *Conn
}

func (h *shutdownHandler) OnShutdown(c *Conn) {
	h.told <- c
	c.WriteMessage(TextMessage, []byte("last words"))
}
