package websocket

import (
	"bufio"
	"context"
	"errors"
	"net"
	nethttp "net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/executor"
	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// TestUpgradeOffloadedRefused: a handler running off the loop cannot take
// the connection over; Upgrade answers 500 and says why.
func TestUpgradeOffloadedRefused(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		pool := executor.NewPool(executor.WithWorkers(1))
		t.Cleanup(func() { pool.Shutdown(context.Background()) })
		u := NewUpgrader(WithLogger(testLogger(t)))
		errc := make(chan error, 1)
		srv := vhttpServer(t, b, vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
			vhttp.Offloaded(pool, vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
				errc <- u.Upgrade(w, r, &HandlerFuncs{})
			})).ServeHTTP(w, r)
		}))
		c, err := net.Dial("tcp", srv.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = c.Write([]byte("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"))
		require.NoError(t, err)
		resp, err := nethttp.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		require.Equal(t, nethttp.StatusInternalServerError, resp.StatusCode)
		require.True(t, errors.Is(<-errc, ErrBadHandshake))
	})
}
