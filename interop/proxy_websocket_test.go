package interop

import (
	"bytes"
	"context"
	"net"
	nethttp "net/http"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/http/proxy"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// gorilla/websocket clients through veloq's reverse proxy to a
// gorilla/websocket echo server on net/http: the handshake passes (its
// Sec-WebSocket-Accept is checked by the client), messages of every size
// up to 1 MiB echo both ways, the close handshake goes through, and every
// tunnel ends.
func TestWebSocketThroughProxy(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		mux := nethttp.NewServeMux()
		mux.HandleFunc("GET /ws", echoServers[0].h) // gorilla's echo
		mux.HandleFunc("GET /plain", func(w nethttp.ResponseWriter, r *nethttp.Request) { w.Write([]byte("plain")) })
		up := &nethttp.Server{Handler: mux}
		go up.Serve(ln)
		t.Cleanup(func() { up.Close() })

		p, err := proxy.New(proxy.WithUpstreams(ln.Addr().String()))
		require.NoError(t, err)
		t.Cleanup(func() { p.Close() })
		s, err := vhttp.NewServer(p, vhttp.WithNetOptions(vnet.WithBackend(b)), vhttp.WithNetOptions(vnet.WithLoops(2)))
		require.NoError(t, err)
		_, err = s.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s.Shutdown(ctx)
		})
		url := "ws://" + s.Addr().String() + "/ws"

		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
				c, resp, err := d.Dial(url, nil)
				if err != nil {
					t.Errorf("client %d: dial: %v", i, err)
					return
				}
				defer c.Close()
				if resp.StatusCode != 101 {
					t.Errorf("client %d: status %d", i, resp.StatusCode)
				}
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				for j, size := range []int{1, 125, 126, 65536, 1 << 20} {
					mt := websocket.BinaryMessage
					if j%2 == 0 {
						mt = websocket.TextMessage
					}
					msg := bytes.Repeat([]byte{byte('a' + (i+j)%26)}, size)
					if err := c.WriteMessage(mt, msg); err != nil {
						t.Errorf("client %d: write %d: %v", i, size, err)
						return
					}
					gotType, got, err := c.ReadMessage()
					if err != nil || gotType != mt || !bytes.Equal(got, msg) {
						t.Errorf("client %d: echo of %d bytes: type %d, %d bytes, %v", i, size, gotType, len(got), err)
						return
					}
				}
				c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				// The server's close frame comes back through the tunnel.
				if _, _, err := c.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
					t.Errorf("client %d: close: %v", i, err)
				}
			}()
		}
		resp, err := nethttp.Get("http://" + s.Addr().String() + "/plain")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		wg.Wait()
		require.Equal(t, uint64(4), p.Stats().Upgrades)
		require.Eventually(t, func() bool { return p.Stats().Tunnels == 0 }, 10*time.Second, 5*time.Millisecond)
	})
}
