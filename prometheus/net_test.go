package prometheus

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// echoOrBlock echoes what it reads; a read of "block" first holds the
// loop past its block threshold, and "flood" answers 8 MiB, more than the
// socket takes while the client does not read, so output stays pending.
var echoOrBlock = &vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
	b, _ := c.Peek(0)
	switch string(b) {
	case "block":
		// The behaviour under test: a callback that blocks the loop, for ten
		// of the 20 ms thresholds, so that the watchdog (two ticks in a row
		// that see the same callback) flags it even when its goroutine is
		// scheduled late on a loaded machine (60 ms missed once in CI).
		time.Sleep(200 * time.Millisecond)
	case "flood":
		c.Write(make([]byte, 8<<20))
		c.Discard(len(b))
		return
	}
	c.Write(b)
	c.Discard(len(b))
}}

// TestNetCollector checks, on both backends, that the per-loop series move
// with real traffic: connections, bytes, a blocked callback, the pending
// output peak and the close; one series per loop, labelled by its index,
// and the backend named by veloq_net_loop_info.
func TestNetCollector(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		s := startNet(t, b, echoOrBlock, vnet.WithLoops(2),
			vnet.WithLoopConfig(vnet.Config{BlockThreshold: 20 * time.Millisecond}))
		reg := register(t, NewNetCollector(s))

		v, series := sum(t, reg, "veloq_net_accepted_connections_total")
		require.Zero(t, v)
		require.Equal(t, 2, series, "one series per loop")
		info, series := sum(t, reg, "veloq_net_loop_info")
		require.Equal(t, 2.0, info)
		require.Equal(t, 2, series)

		c := dial(t, s.Addr().String())
		_, err := c.Write([]byte("ping"))
		require.NoError(t, err)
		got := make([]byte, 4)
		_, err = io.ReadFull(c, got)
		require.NoError(t, err)
		require.Equal(t, "ping", string(got))
		eventually(t, reg, "veloq_net_accepted_connections_total", equals(1), "one accepted")
		eventually(t, reg, "veloq_net_connections", equals(1), "one open")
		eventually(t, reg, "veloq_net_received_bytes_total", equals(4), "ping received")
		eventually(t, reg, "veloq_net_loop_iterations_total", atLeast(1), "the loops ran")

		_, err = c.Write([]byte("block"))
		require.NoError(t, err)
		got = make([]byte, 5)
		_, err = io.ReadFull(c, got)
		require.NoError(t, err)
		eventually(t, reg, "veloq_net_blocked_callbacks_total", equals(1), "the blocking callback counted")
		// A loop publishes its byte counters once per iteration, before it
		// flushes output (net.Loop.publish): the echoed ping shows once the
		// loop has run again, as it has for "block".
		eventually(t, reg, "veloq_net_sent_bytes_total", atLeast(4), "ping sent")

		// The client reads nothing of the flood until the server's peak is
		// seen, then drains it so the close is clean.
		_, err = c.Write([]byte("flood"))
		require.NoError(t, err)
		eventually(t, reg, "veloq_net_peak_connection_output_bytes", atLeast(1), "output pending for the client")
		n, err := io.CopyN(io.Discard, c, 8<<20)
		require.NoError(t, err)
		require.Equal(t, int64(8<<20), n)

		require.NoError(t, c.Close())
		eventually(t, reg, "veloq_net_connections", equals(0), "none open")
		eventually(t, reg, "veloq_net_closed_connections_total", equals(1), "one closed")

		// A real scrape: the text a Prometheus server reads, with types.
		text := scrape(t, reg)
		requireLines(t, text,
			"# TYPE veloq_net_accepted_connections_total counter",
			"# TYPE veloq_net_connections gauge",
			"# TYPE veloq_net_peak_connection_output_bytes gauge",
			"# TYPE veloq_net_blocked_callbacks_total counter",
			fmt.Sprintf(`veloq_net_loop_info{backend="%s",loop="0"} 1`, b),
			fmt.Sprintf(`veloq_net_loop_info{backend="%s",loop="1"} 1`, b),
		)
	})
}

// TestNetCollectorTLS checks, on both backends, that a completed TLS
// handshake and a peer whose handshake fails are counted.
func TestNetCollectorTLS(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		s := startNet(t, b, echoOrBlock, vnet.WithLoops(1), vnet.WithTLS(selfSigned(t)))
		reg := register(t, NewNetCollector(s))

		c := tls.Client(dial(t, s.Addr().String()), &tls.Config{InsecureSkipVerify: true})
		require.NoError(t, c.Handshake())
		_, err := c.Write([]byte("ping"))
		require.NoError(t, err)
		got := make([]byte, 4)
		_, err = io.ReadFull(c, got)
		require.NoError(t, err)
		eventually(t, reg, "veloq_net_tls_handshakes_total", equals(1), "one handshake")

		// Not a TLS record at all: the handshake fails on the server.
		bad := dial(t, s.Addr().String())
		_, err = bad.Write(bytes.Repeat([]byte("GET / HTTP/1.1\r\n"), 4))
		require.NoError(t, err)
		eventually(t, reg, "veloq_net_tls_handshake_errors_total", equals(1), "one failed handshake")
	})
}

// TestConstLabels checks that two servers register side by side in one
// registry when their collectors carry different constant labels, and
// clash without them.
func TestConstLabels(t *testing.T) {
	s1 := startNet(t, vnet.BackendEpoll, echoOrBlock, vnet.WithLoops(1))
	s2 := startNet(t, vnet.BackendEpoll, echoOrBlock, vnet.WithLoops(1))
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(NewNetCollector(s1, WithConstLabels(prometheus.Labels{"server": "a"}))))
	require.NoError(t, reg.Register(NewNetCollector(s2, WithConstLabels(prometheus.Labels{"server": "b"}))))
	require.Error(t, reg.Register(NewNetCollector(s2, WithConstLabels(prometheus.Labels{"server": "b"}))), "the same labels twice must clash")
	require.Error(t, reg.Register(NewNetCollector(s2, WithConstLabels(prometheus.Labels{"loop": "x"}))), "a constant label named like a variable one is refused")

	c := dial(t, s2.Addr().String())
	_, err := c.Write([]byte("ping"))
	require.NoError(t, err)
	_, err = io.ReadFull(c, make([]byte, 4))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return bytes.Contains([]byte(scrape(t, reg)), []byte(`veloq_net_accepted_connections_total{loop="0",server="b"} 1`))
	}, 5*time.Second, 2*time.Millisecond)
	requireLines(t, scrape(t, reg), `veloq_net_accepted_connections_total{loop="0",server="a"} 0`)
}
