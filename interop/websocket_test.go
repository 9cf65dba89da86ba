package interop

import (
	"bytes"
	"context"
	"fmt"
	nethttp "net/http"
	"sync"
	"testing"
	"time"

	coderws "github.com/coder/websocket"
	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// Echo servers written against each library's net/http integration.
var echoServers = []struct {
	name string
	h    nethttp.HandlerFunc
}{
	{"gorilla", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		up := websocket.Upgrader{}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(mt, msg); err != nil {
				return
			}
		}
	}},
	{"coder", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		c, err := coderws.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(4 << 20)
		ctx := context.Background() // r.Context() ends when the handler returns
		for {
			mt, msg, err := c.Read(ctx)
			if err != nil {
				return
			}
			if err := c.Write(ctx, mt, msg); err != nil {
				return
			}
		}
	}},
	{"gobwas", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		conn, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			return
		}
		go func() { // gobwas hands the connection over: serve it on
			defer conn.Close()
			for {
				msg, op, err := wsutil.ReadClientData(conn)
				if err != nil {
					return
				}
				if err := wsutil.WriteServerMessage(conn, op, msg); err != nil {
					return
				}
			}
		}()
	}},
}

// Each library's echo server works through FromStd unchanged: several
// clients at once, small and large messages, text and binary, then a
// clean close; ordinary HTTP requests are still served beside them.
func TestWebSocketThroughFromStd(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		for _, srv := range echoServers {
			t.Run(srv.name, func(t *testing.T) {
				mux := nethttp.NewServeMux()
				mux.Handle("GET /ws", srv.h)
				mux.HandleFunc("GET /plain", func(w nethttp.ResponseWriter, r *nethttp.Request) { fmt.Fprint(w, "plain") })
				s, err := vhttp.NewServer(vhttp.FromStd(mux), vhttp.WithNetOptions(vnet.WithBackend(b)), vhttp.WithNetOptions(vnet.WithLoops(2)))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					require.NoError(t, s.Shutdown(ctx))
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
					}()
				}
				resp, err := nethttp.Get("http://" + s.Addr().String() + "/plain")
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, 200, resp.StatusCode)
				wg.Wait()
				require.Eventually(t, func() bool { return s.Stats().Hijacked == 4 }, 5*time.Second, 5*time.Millisecond)
			})
		}
	})
}
