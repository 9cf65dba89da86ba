package interop

import (
	"bytes"
	"net/http"
	"testing"
	"time"
	"unicode/utf8"

	gorilla "github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func gorillaDial(t *testing.T, url string, d *gorilla.Dialer) (*gorilla.Conn, *http.Response) {
	t.Helper()
	if d == nil {
		d = &gorilla.Dialer{HandshakeTimeout: 5 * time.Second}
	}
	c, resp, err := d.Dial(url, nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	return c, resp
}

func TestGorillaEcho(t *testing.T) {
	run(t, func(t *testing.T, url, addr string) {
		c, resp := gorillaDial(t, url, nil)
		require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
		for _, n := range sizes {
			for _, typ := range []int{gorilla.TextMessage, gorilla.BinaryMessage} {
				p := payload(n, byte(typ))
				require.NoError(t, c.WriteMessage(typ, p))
				gt, got, err := c.ReadMessage()
				require.NoError(t, err, "size %d", n)
				require.Equal(t, typ, gt)
				require.True(t, bytes.Equal(p, got), "size %d: echo differs", n)
			}
		}
	})
}

func TestGorillaSubprotocolAndCompression(t *testing.T) {
	run(t, func(t *testing.T, url, addr string) {
		d := &gorilla.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{"other", "chat"}, EnableCompression: true}
		c, resp := gorillaDial(t, url, d)
		assert.Equal(t, "chat", c.Subprotocol())
		assert.Contains(t, resp.Header.Get("Sec-WebSocket-Extensions"), "permessage-deflate")
		for _, n := range []int{10, 200, 70000, 1 << 20} {
			p := bytes.Repeat([]byte("compressible "), n/13+1)[:n]
			require.NoError(t, c.WriteMessage(gorilla.TextMessage, p)) // gorilla compresses it
			_, got, err := c.ReadMessage()                             // and inflates the echo
			require.NoError(t, err)
			require.True(t, bytes.Equal(p, got), "size %d", n)
		}
	})
}

// gorilla fragments a message written through NextWriter in pieces of
// its write buffer size.
func TestGorillaFragmented(t *testing.T) {
	run(t, func(t *testing.T, url, addr string) {
		c, _ := gorillaDial(t, url, &gorilla.Dialer{HandshakeTimeout: 5 * time.Second, WriteBufferSize: 256})
		p := []byte(string(bytes.Repeat([]byte("€𝄞 fragment "), 400)))
		require.True(t, utf8.Valid(p))
		w, err := c.NextWriter(gorilla.TextMessage)
		require.NoError(t, err)
		for off := 0; off < len(p); off += 100 {
			w.Write(p[off:min(off+100, len(p))])
		}
		require.NoError(t, w.Close())
		_, got, err := c.ReadMessage()
		require.NoError(t, err)
		require.Equal(t, string(p), string(got))
	})
}

func TestGorillaPingPong(t *testing.T) {
	run(t, func(t *testing.T, url, addr string) {
		c, _ := gorillaDial(t, url, nil)
		pong := make(chan string, 1)
		c.SetPongHandler(func(s string) error { pong <- s; return nil })
		require.NoError(t, c.WriteControl(gorilla.PingMessage, []byte("are you there"), time.Now().Add(time.Second)))
		require.NoError(t, c.WriteMessage(gorilla.TextMessage, []byte("after ping")))
		_, got, err := c.ReadMessage() // runs the pong handler first
		require.NoError(t, err)
		require.Equal(t, "after ping", string(got))
		require.Equal(t, "are you there", <-pong)
	})
}

func TestGorillaCloseHandshake(t *testing.T) {
	run(t, func(t *testing.T, url, addr string) {
		// Client-initiated: the server echoes the code.
		c, _ := gorillaDial(t, url, nil)
		require.NoError(t, c.WriteMessage(gorilla.CloseMessage, gorilla.FormatCloseMessage(4000, "done")))
		_, _, err := c.ReadMessage()
		require.True(t, gorilla.IsCloseError(err, 4000), "got %v", err)

		// Server-initiated.
		c, _ = gorillaDial(t, url, nil)
		require.NoError(t, c.WriteMessage(gorilla.TextMessage, []byte("close-me")))
		_, _, err = c.ReadMessage()
		var ce *gorilla.CloseError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, gorilla.CloseGoingAway, ce.Code)
		assert.Equal(t, "bye", ce.Text)

		// Invalid UTF-8 (gorilla does not check what it sends): 1007.
		c, _ = gorillaDial(t, url, nil)
		require.NoError(t, c.WriteMessage(gorilla.TextMessage, []byte{'o', 'k', 0xff}))
		_, _, err = c.ReadMessage()
		require.True(t, gorilla.IsCloseError(err, gorilla.CloseInvalidFramePayloadData), "got %v", err)
	})
}
