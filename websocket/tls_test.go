package websocket

import (
	"bufio"
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	"github.com/veloq/veloq/internal/selfsigned"
	vnet "github.com/veloq/veloq/net"
)

// WSS: the upgrade and the frames run over the connection's TLS layer,
// with the package unchanged; messages larger than a TLS record echo
// whole.
func TestWSS(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		cert, err := selfsigned.New(time.Hour)
		require.NoError(t, err)
		ev := &events{}
		u := NewUpgrader(WithLogger(testLogger(t)))
		srv, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
			u.Upgrade(w, r, echoHandler(ev))
		}), vhttp.WithNetOptions(vnet.WithBackend(b)), vhttp.WithNetOptions(vnet.WithLoops(1)), vhttp.WithLogger(testLogger(t)), vhttp.WithTLS(cert.ServerConfig()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = srv.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { srv.Close() })

		conn, err := tls.Dial("tcp", srv.Addr().String(), cert.ClientConfig("localhost"))
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		c := &wsClient{t: t, conn: conn, br: bufio.NewReader(conn), dec: Decoder{FromServer: true, WaitLimit: 1 << 30}}
		status, head := c.handshake()
		require.Equal(t, 101, status, head)
		for _, n := range []int{5, 40 << 10} {
			msg := make([]byte, n)
			for i := range msg {
				msg[i] = byte(i)
			}
			c.send(OpBinary, true, msg)
			f := c.mustRead()
			require.Equal(t, OpBinary, f.op)
			require.Equal(t, msg, f.payload)
		}
	})
}
