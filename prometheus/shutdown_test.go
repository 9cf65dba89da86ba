package prometheus

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// TestNetCollectorShutdown checks, on both backends, that a graceful
// Shutdown's outcome is exported: a connection its client closes during
// the drain is drained, one still open at the deadline is cut.
func TestNetCollectorShutdown(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		told := make(chan struct{}, 2)
		s := startNet(t, b, &toldHandler{echoOrBlock, told}, vnet.WithLoops(1))
		reg := register(t, NewNetCollector(s))
		leaves, stays := dial(t, s.Addr().String()), dial(t, s.Addr().String())
		for _, c := range []io.ReadWriter{leaves, stays} {
			_, err := c.Write([]byte("hi"))
			require.NoError(t, err)
			_, err = io.ReadFull(c, make([]byte, 2))
			require.NoError(t, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- s.Shutdown(ctx) }()
		<-told
		<-told // the drain has begun
		require.NoError(t, leaves.Close())
		eventually(t, reg, "veloq_net_drained_connections_total", equals(1), "one drained")
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		eventually(t, reg, "veloq_net_cut_connections_total", equals(1), "one cut")
		requireLines(t, scrape(t, reg),
			"# TYPE veloq_net_drained_connections_total counter",
			"# TYPE veloq_net_cut_connections_total counter")
	})
}

// toldHandler signals each OnShutdown and leaves the connection open.
type toldHandler struct {
	*vnet.HandlerFuncs
	told chan<- struct{}
}

func (h *toldHandler) OnShutdown(*vnet.Conn) { h.told <- struct{}{} }
