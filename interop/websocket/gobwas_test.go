package interop

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gobwas/httphead"
	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsflate"
	"github.com/gobwas/ws/wsutil"
	"github.com/stretchr/testify/require"
)

func gobwasDial(t *testing.T, url string, d ws.Dialer) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, br, _, err := d.Dial(ctx, url)
	require.NoError(t, err)
	require.Nil(t, br, "no bytes after the handshake response")
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn
}

// maxFrame bounds the payload readFrame accepts: the largest frame these
// tests expect is an 18 KB message.
const maxFrame = 1 << 20

// readFrame reads one frame as ws.ReadFrame does, but refuses a payload
// longer than maxFrame instead of reading whatever length the peer
// declares (the reason gobwas deprecates ReadFrame).
func readFrame(r io.Reader) (ws.Frame, error) {
	h, err := ws.ReadHeader(r)
	if err != nil {
		return ws.Frame{}, err
	}
	if h.Length > maxFrame {
		return ws.Frame{}, fmt.Errorf("frame payload of %d bytes, more than %d", h.Length, maxFrame)
	}
	p := make([]byte, h.Length)
	if _, err := io.ReadFull(r, p); err != nil {
		return ws.Frame{}, err
	}
	if h.Masked {
		ws.Cipher(p, h.Mask, 0)
	}
	return ws.Frame{Header: h, Payload: p}, nil
}

func TestGobwasEcho(t *testing.T) {
	run(t, func(t *testing.T, url, addr string) {
		conn := gobwasDial(t, url, ws.Dialer{})
		for _, n := range sizes {
			for _, op := range []ws.OpCode{ws.OpText, ws.OpBinary} {
				p := payload(n, byte(op))
				require.NoError(t, wsutil.WriteClientMessage(conn, op, p))
				got, gop, err := wsutil.ReadServerData(conn)
				require.NoError(t, err, "size %d", n)
				require.Equal(t, op, gop)
				require.True(t, bytes.Equal(p, got), "size %d", n)
			}
		}
	})
}

// Raw frames through gobwas's frame API: fragments with a ping between
// them, then the close handshake.
func TestGobwasFramesAndClose(t *testing.T) {
	run(t, func(t *testing.T, url, addr string) {
		conn := gobwasDial(t, url, ws.Dialer{Protocols: []string{"chat"}})
		send := func(f ws.Frame) {
			require.NoError(t, ws.WriteFrame(conn, ws.MaskFrameInPlace(f)))
		}
		send(ws.NewFrame(ws.OpText, false, []byte("Hel")))
		send(ws.NewPingFrame([]byte("ping!")))
		send(ws.NewFrame(ws.OpContinuation, false, []byte("lo, ")))
		send(ws.NewFrame(ws.OpContinuation, true, []byte("world")))

		f, err := readFrame(conn)
		require.NoError(t, err)
		require.Equal(t, ws.OpPong, f.Header.OpCode)
		require.Equal(t, "ping!", string(f.Payload))
		require.False(t, f.Header.Masked, "server frames are not masked")

		f, err = readFrame(conn)
		require.NoError(t, err)
		require.Equal(t, ws.OpText, f.Header.OpCode)
		require.True(t, f.Header.Fin)
		require.Equal(t, "Hello, world", string(f.Payload))

		send(ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, "bye")))
		f, err = readFrame(conn)
		require.NoError(t, err)
		require.Equal(t, ws.OpClose, f.Header.OpCode)
		code, _ := ws.ParseCloseFrameData(f.Payload)
		require.Equal(t, ws.StatusNormalClosure, code)
		_, err = readFrame(conn)
		require.Error(t, err, "the server closes the TCP connection")

		// An unmasked frame is a protocol error.
		conn = gobwasDial(t, url, ws.Dialer{})
		require.NoError(t, ws.WriteFrame(conn, ws.NewTextFrame([]byte("unmasked"))))
		f, err = readFrame(conn)
		require.NoError(t, err)
		code, _ = ws.ParseCloseFrameData(f.Payload)
		require.Equal(t, ws.StatusProtocolError, code)
	})
}

// gobwas's permessage-deflate (wsflate) against the server's.
func TestGobwasDeflate(t *testing.T) {
	run(t, func(t *testing.T, url, addr string) {
		params := wsflate.DefaultParameters
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, _, hs, err := ws.Dialer{Extensions: []httphead.Option{params.Option()}}.Dial(ctx, url)
		require.NoError(t, err)
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		require.Len(t, hs.Extensions, 1, "permessage-deflate accepted")
		var got wsflate.Parameters
		require.NoError(t, got.Parse(hs.Extensions[0]))
		require.True(t, got.ServerNoContextTakeover && got.ClientNoContextTakeover)

		msg := bytes.Repeat([]byte("deflate me please "), 1000)
		f, err := wsflate.CompressFrame(ws.NewBinaryFrame(msg))
		require.NoError(t, err)
		require.NoError(t, ws.WriteFrame(conn, ws.MaskFrameInPlace(f)))

		f, err = readFrame(conn)
		require.NoError(t, err)
		compressed, err := wsflate.IsCompressed(f.Header)
		require.NoError(t, err)
		require.True(t, compressed, "the echo of a large message comes back compressed")
		require.Less(t, len(f.Payload), len(msg)/10)
		f, err = wsflate.DecompressFrame(f)
		require.NoError(t, err)
		require.Equal(t, msg, f.Payload)
	})
}
