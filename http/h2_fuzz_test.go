package http

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2/hpack"

	"github.com/veloq/veloq/http/internal/h2"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// FuzzHTTP2Frames sends arbitrary bytes, after a client's preface and
// SETTINGS, to a real server on 127.0.0.1 on each backend, then a PING,
// then ends its side of the connection. Whatever the bytes: the server
// writes only well-formed frames, its SETTINGS first; it answers the
// PING, or says GOAWAY and closes, within 3 s; where the fuzzed bytes
// leave a frame incomplete and so swallow the PING, it closes within 3 s
// (the read-body timeout, 1 s here, bounds a stream still waiting for its
// body); and it goes on serving a well-behaved client. A panic in the server's frame handling would end
// the fuzzing process.
func FuzzHTTP2Frames(f *testing.F) {
	var eb bytes.Buffer
	enc := hpack.NewEncoder(&eb)
	for _, fl := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/echo"}, {":authority", "x"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: fl[0], Value: fl[1]})
	}
	post := bytes.Clone(eb.Bytes())
	f.Add([]byte{})
	f.Add(h2.AppendData(h2.AppendHeaders(nil, 1, false, post, h2.MinMaxFrameSize), 1, true, []byte("hi")))
	f.Add(h2.AppendHeaders(nil, 1, true, post[:3], h2.MinMaxFrameSize))                                // truncated block
	f.Add(h2.AppendHeader(nil, h2.Header{Length: uint32(len(post)), Type: h2.TypeHeaders, Stream: 1})) // no block
	f.Add(h2.AppendSettingsAck(h2.AppendWindowUpdate(nil, 0, 1<<20)))
	f.Add(h2.AppendRSTStream(h2.AppendData(nil, 3, false, []byte("x")), 5, h2.Cancel))
	f.Add(h2.AppendGoAway(nil, 0, h2.NoError, []byte("bye")))
	f.Add(h2.AppendHeader(nil, h2.Header{Length: 1 << 20, Type: h2.TypeData, Stream: 1}))
	f.Add(append(h2.AppendHeader(nil, h2.Header{Length: 5, Type: h2.TypePriority, Stream: 1}), 0, 0, 0, 1, 16))

	var addrs []string
	for _, b := range backendtest.All[vnet.Backend]() {
		if err := b.Available(); err != nil {
			if backendtest.Required(string(b)) {
				f.Fatalf("%s unavailable here: %v", b, err)
			}
			f.Logf("%s unavailable here, fuzzing without it: %v", b, err)
			continue
		}
		// The server's warnings about the bad frames are the point of the
		// run, not news: they are dropped.
		s := startServer(f, b, HandlerFunc(testHandler), WithNetOptions(vnet.WithLoops(1)), WithReadBodyTimeout(time.Second), WithLogger(slog.New(slog.DiscardHandler)))
		addrs = append(addrs, s.Addr().String())
	}
	f.Fuzz(func(t *testing.T, frames []byte) {
		for _, addr := range addrs {
			checkH2Frames(t, addr, frames)
		}
	})
}

// checkH2Frames runs one FuzzHTTP2Frames input against the server at addr.
func checkH2Frames(t *testing.T, addr string, frames []byte) {
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(3*time.Second)))
	ping := [8]byte{'f', 'u', 'z', 'z'}
	out := append([]byte(h2.ClientPreface), h2.AppendSettings(nil)...)
	sent := len(out)
	out = append(out, frames...)
	out = h2.AppendPing(out, false, ping)
	_, _ = c.Write(out) // the server may have closed already
	require.NoError(t, c.(*net.TCPConn).CloseWrite())

	// Read frames until the PING's answer, or until the server closes.
	var in, got []byte
	buf := make([]byte, 16<<10)
	var answered, goAway, closed, reset bool
	for i := 0; !answered && !closed; {
		h, p, n, err := h2.Next(in, h2.MaxMaxFrameSize)
		require.NoError(t, err, "frame %d from the server", i)
		if n == 0 {
			k, err := c.Read(buf)
			in = append(in, buf[:k]...)
			got = append(got, buf[:k]...)
			switch {
			case err == nil:
			case errors.Is(err, io.EOF):
				closed = true
			case errors.Is(err, syscall.ECONNRESET):
				// A server that closes with input unread resets the
				// connection, and the reset may discard what it wrote
				// last, GOAWAY included.
				closed, reset = true, true
			default:
				require.NoError(t, err, "the server neither answered nor closed (a stall) after sending %x", got)
			}
			continue
		}
		in = in[n:]
		if i == 0 {
			require.True(t, h.Type == h2.TypeSettings && !h.Flags.Has(h2.FlagAck), "the server's first frame is %v, not its SETTINGS", h.Type)
		}
		i++
		switch h.Type {
		case h2.TypePing:
			data, err := h2.ParsePing(h, p)
			require.NoError(t, err)
			answered = h.Flags.Has(h2.FlagAck) && data == ping
		case h2.TypeGoAway:
			_, _, _, err := h2.ParseGoAway(h, p)
			require.NoError(t, err)
			goAway = true
		}
	}
	if closed && !reset {
		require.Empty(t, in, "the server's output ends inside a frame")
	}
	clientGoAway, pingSent := scanClient(out[sent:])
	if pingSent {
		require.True(t, answered || goAway || reset || clientGoAway, "neither a PING ACK nor a GOAWAY before the close (read %x)", got)
	}

	good := dialH2(t, addr)
	require.NoError(t, good.write(good.get(1, "/")))
	require.Equal(t, 200, good.status(1), "a well-behaved client is served afterwards")
}

// scanClient frames what the client sent after its SETTINGS as the
// server does. goAway: a GOAWAY is among the well-formed frames (after
// it, a server with no stream open may close without answering).
// pingSent: the frames end exactly where the PING does, so the server got
// it as a PING (fuzzed bytes that leave a frame incomplete swallow it).
func scanClient(frames []byte) (goAway, pingSent bool) {
	pingLen := len(h2.AppendPing(nil, false, [8]byte{}))
	for {
		if len(frames) == pingLen {
			return goAway, true // a frame starts at the PING: it is whole
		}
		h, _, n, err := h2.Next(frames, h2.MaxMaxFrameSize)
		if err != nil || n == 0 {
			return goAway, false
		}
		goAway = goAway || h.Type == h2.TypeGoAway
		frames = frames[n:]
	}
}
