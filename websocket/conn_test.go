package websocket

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// One table of RFC 6455 behaviours, each a conversation over a real
// socket with a server echoing messages: what the client sends, what it
// must get back, and how the connection must end.
func TestRFC6455OverSockets(t *testing.T) {
	type step struct {
		send   []byte // raw bytes to write
		expect []frame
	}
	text := func(s string) frame { return frame{op: OpText, fin: true, payload: []byte(s)} }
	bin := func(b []byte) frame { return frame{op: OpBinary, fin: true, payload: b} }
	m := mustMasked
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	cases := []struct {
		section string
		steps   []step
		close   StatusCode // the close code the server must end with; 0: stays open
	}{
		{"5.6 text echo", []step{{m(OpText, true, 0, []byte("Hello")), []frame{text("Hello")}}}, 0},
		{"5.6 binary echo", []step{{m(OpBinary, true, 0, []byte{0, 0xff, 1}), []frame{bin([]byte{0, 0xff, 1})}}}, 0},
		{"5.6 empty text", []step{{m(OpText, true, 0, nil), []frame{text("")}}}, 0},
		{"5.2 16-bit length", []step{{m(OpBinary, true, 0, bytes.Repeat([]byte{7}, 1000)), []frame{bin(bytes.Repeat([]byte{7}, 1000))}}}, 0},
		{"5.4 fragmented text", []step{{cat(m(OpText, false, 0, []byte("Hel")), m(OpContinuation, false, 0, []byte("l")), m(OpContinuation, true, 0, []byte("o"))), []frame{text("Hello")}}}, 0},
		{"5.4 fragments in separate writes", []step{
			{m(OpBinary, false, 0, []byte("ab")), nil},
			{m(OpContinuation, true, 0, []byte("cd")), []frame{bin([]byte("abcd"))}},
		}, 0},
		{"5.4 ping between fragments", []step{{cat(m(OpText, false, 0, []byte("frag")), m(OpPing, true, 0, []byte("p!")), m(OpContinuation, true, 0, []byte("ment"))),
			[]frame{{op: OpPong, fin: true, payload: []byte("p!")}, text("fragment")}}}, 0},
		{"5.4 pong between fragments is absorbed", []step{{cat(m(OpText, false, 0, []byte("a")), m(OpPong, true, 0, []byte("x")), m(OpContinuation, true, 0, []byte("b"))), []frame{text("ab")}}}, 0},
		{"5.5.2 ping answered with pong", []step{{m(OpPing, true, 0, []byte("hello")), []frame{{op: OpPong, fin: true, payload: []byte("hello")}}}}, 0},
		{"5.5.2 ping with 125 bytes", []step{{m(OpPing, true, 0, bytes.Repeat([]byte{'x'}, 125)), []frame{{op: OpPong, fin: true, payload: bytes.Repeat([]byte{'x'}, 125)}}}}, 0},
		{"5.5.3 unsolicited pong ignored", []step{{cat(m(OpPong, true, 0, []byte("?")), m(OpText, true, 0, []byte("after"))), []frame{text("after")}}}, 0},
		{"6.1 utf8 code point across fragments", []step{{cat(m(OpText, false, 0, []byte{0xE2, 0x82}), m(OpContinuation, true, 0, []byte{0xAC})), []frame{text("€")}}}, 0},

		{"5.1 unmasked client frame", []step{{[]byte{0x81, 0x02, 'h', 'i'}, nil}}, StatusProtocolError},
		{"5.2 RSV1 without extension", []step{{m(OpText, true, Rsv1, []byte("x")), nil}}, StatusProtocolError},
		{"5.2 RSV2", []step{{m(OpBinary, true, Rsv2, nil), nil}}, StatusProtocolError},
		{"5.2 RSV3", []step{{m(OpPing, true, Rsv3, nil), nil}}, StatusProtocolError},
		{"5.2 reserved data opcode 3", []step{{m(3, true, 0, nil), nil}}, StatusProtocolError},
		{"5.2 reserved data opcode 7", []step{{m(7, true, 0, nil), nil}}, StatusProtocolError},
		{"5.2 reserved control opcode 0xB", []step{{m(0xB, true, 0, nil), nil}}, StatusProtocolError},
		{"5.2 reserved control opcode 0xF", []step{{m(0xF, true, 0, []byte("x")), nil}}, StatusProtocolError},
		{"5.2 non-minimal length", []step{{[]byte{0x82, 0xFE, 0, 3, 1, 2, 3, 4, 5, 6, 7}, nil}}, StatusProtocolError},
		{"5.4 continuation without a message", []step{{m(OpContinuation, true, 0, []byte("x")), nil}}, StatusProtocolError},
		{"5.4 new message inside a fragmented one", []step{{cat(m(OpText, false, 0, []byte("a")), m(OpBinary, true, 0, []byte("b"))), nil}}, StatusProtocolError},
		{"5.5 fragmented ping", []step{{m(OpPing, false, 0, []byte("x")), nil}}, StatusProtocolError},
		{"5.5 ping of 126 bytes", []step{{m(OpPing, true, 0, make([]byte, 126)), nil}}, StatusProtocolError},
		{"5.5 close of 126 bytes", []step{{m(OpClose, true, 0, append([]byte{3, 0xe8}, make([]byte, 124)...)), nil}}, StatusProtocolError},
		{"8.1 invalid utf8", []step{{m(OpText, true, 0, []byte{'a', 0xff}), nil}}, StatusInvalidPayload},
		{"8.1 invalid utf8 across fragments", []step{{cat(m(OpText, false, 0, []byte{0xE2, 0x82}), m(OpContinuation, true, 0, []byte{'('})), nil}}, StatusInvalidPayload},
		{"8.1 surrogate in a later fragment", []step{{m(OpText, false, 0, []byte("ok")), []frame{}}, {m(OpContinuation, true, 0, []byte{0xED, 0xA0, 0x80}), nil}}, StatusInvalidPayload},
		{"8.1 truncated code point at message end", []step{{m(OpText, true, 0, []byte{0xCE}), nil}}, StatusInvalidPayload},
		{"10.4 frame over the limit", []step{{m(OpBinary, true, 0, make([]byte, 1025)), nil}}, StatusMessageTooBig},
		{"10.4 message over the limit", []step{{cat(m(OpBinary, false, 0, make([]byte, 1000)), m(OpContinuation, false, 0, make([]byte, 1000)), m(OpContinuation, true, 0, make([]byte, 1000))), nil}}, StatusMessageTooBig},
		{"7.4 close with no code", []step{{m(OpClose, true, 0, nil), nil}}, StatusNoStatusReceived},
		{"5.5.1 close with a 1-byte payload", []step{{m(OpClose, true, 0, []byte{3}), nil}}, StatusProtocolError},
		{"7.4 close reason not utf8", []step{{m(OpClose, true, 0, closePayload(1000, "\xff\xfe")), nil}}, StatusInvalidPayload},
		{"1.4 data after close is not echoed", []step{{cat(m(OpClose, true, 0, closePayload(1000, "")), m(OpText, true, 0, []byte("late"))), nil}}, StatusNormalClosure},
	}
	// §7.4.1/7.4.2: every valid code is echoed, every invalid one fails
	// the connection with 1002.
	for _, code := range []uint16{1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999} {
		cases = append(cases, struct {
			section string
			steps   []step
			close   StatusCode
		}{fmt.Sprintf("7.4 close code %d echoed", code), []step{{m(OpClose, true, 0, closePayload(code, "reason")), nil}}, StatusCode(code)})
	}
	for _, code := range []uint16{0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535} {
		cases = append(cases, struct {
			section string
			steps   []step
			close   StatusCode
		}{fmt.Sprintf("7.4 invalid close code %d", code), []step{{m(OpClose, true, 0, closePayload(code, "")), nil}}, StatusProtocolError})
	}

	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		ev := &events{}
		srv, _ := startWS(t, b, echoHandler(ev), WithMessageLimits(1024, 2048))
		for _, tc := range cases {
			t.Run(tc.section, func(t *testing.T) {
				c := dialWS(t, srv.Addr().String())
				for _, s := range tc.steps {
					c.write(s.send)
					for _, want := range s.expect {
						got := c.mustRead()
						require.Equal(t, want.op, got.op)
						require.Equal(t, len(want.payload), len(got.payload))
						require.True(t, bytes.Equal(want.payload, got.payload), "payload %q", got.payload)
					}
				}
				if tc.close == 0 {
					// Still open: a further message is echoed.
					c.send(OpText, true, []byte("still open"))
					require.Equal(t, "still open", string(c.mustRead().payload))
					return
				}
				f := c.expectClose(tc.close)
				if tc.close == StatusNoStatusReceived {
					require.Empty(t, f.payload, "an empty close is answered with an empty close")
				}
			})
		}
		// Every connection told its handler it ended (the ones left open
		// were closed by their subtests' cleanup).
		require.Eventually(t, func() bool { return len(ev.closeErrs()) == len(cases) }, 5*time.Second, 5*time.Millisecond)
		require.Equal(t, len(cases), ev.openCount())
	})
}

// The handler sees why each connection ended.
func TestOnCloseReasons(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		ev := &events{}
		srv, u := startWS(t, b, echoHandler(ev), WithCloseHandshakeTimeout(200*time.Millisecond))
		addr := srv.Addr().String()

		// Peer-initiated close: *CloseError with the peer's code and reason.
		c := dialWS(t, addr)
		c.send(OpClose, true, closePayload(4001, "done here"))
		c.expectClose(4001)
		require.Eventually(t, func() bool { return len(ev.closeErrs()) == 1 }, 5*time.Second, time.Millisecond)
		var ce *CloseError
		require.ErrorAs(t, ev.closeErrs()[0], &ce)
		assert.Equal(t, StatusCode(4001), ce.Code)
		assert.Equal(t, "done here", ce.Reason)

		// Protocol violation: *ProtocolError with the code sent.
		c = dialWS(t, addr)
		c.write([]byte{0x81, 0x00}) // unmasked
		c.expectClose(StatusProtocolError)
		require.Eventually(t, func() bool { return len(ev.closeErrs()) == 2 }, 5*time.Second, time.Millisecond)
		var pe *ProtocolError
		require.ErrorAs(t, ev.closeErrs()[1], &pe)
		assert.Equal(t, StatusProtocolError, pe.Code)
		assert.ErrorIs(t, ev.closeErrs()[1], ErrProtocol)

		// TCP gone without a close frame: ErrAbnormalClosure.
		c = dialWS(t, addr)
		c.send(OpText, true, []byte("x"))
		c.mustRead()
		c.conn.Close()
		require.Eventually(t, func() bool { return len(ev.closeErrs()) == 3 }, 5*time.Second, time.Millisecond)
		assert.ErrorIs(t, ev.closeErrs()[2], ErrAbnormalClosure)

		// Server-initiated close answered by the client: nil.
		c = dialWS(t, addr)
		c.send(OpText, true, []byte("close-me"))
		f := c.mustRead()
		require.Equal(t, OpClose, f.op)
		assert.Equal(t, StatusGoingAway, f.code)
		assert.Equal(t, "bye", f.reason)
		c.send(OpText, true, []byte("dropped: the server is closing")) // not echoed
		c.send(OpClose, true, closePayload(1001, ""))
		c.expectEOF()
		require.Eventually(t, func() bool { return len(ev.closeErrs()) == 4 }, 5*time.Second, time.Millisecond)
		assert.NoError(t, ev.closeErrs()[3])

		// Server-initiated close the client never answers: ErrCloseTimeout.
		c = dialWS(t, addr)
		c.send(OpText, true, []byte("close-me"))
		require.Equal(t, OpClose, c.mustRead().op)
		c.expectEOF() // after WithCloseHandshakeTimeout
		require.Eventually(t, func() bool { return len(ev.closeErrs()) == 5 }, 5*time.Second, time.Millisecond)
		assert.ErrorIs(t, ev.closeErrs()[4], ErrCloseTimeout)

		// The Upgrader counted each ending by its kind.
		assert.Equal(t, Stats{Upgrades: 5, Open: 0, ClosedByPeer: 1, ClosedLocally: 2, ProtocolErrors: 1, Abnormal: 1}, u.Stats())
	})
}

// A frame larger than the wait limit is streamed through the assembly
// buffer as it arrives, in pieces of any size, and still echoed intact.
func TestLargeMessagesStreamed(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		srv, _ := startWS(t, b, echoHandler(&events{}), WithMessageLimits(1<<20, 3<<20))
		c := dialWS(t, srv.Addr().String())
		big := make([]byte, 900<<10)
		for i := range big {
			big[i] = byte(i * 31)
		}
		frames := bytes.Join([][]byte{
			mustMasked(OpBinary, false, 0, big[:300<<10]),
			mustMasked(OpPing, true, 0, []byte("mid")),
			mustMasked(OpContinuation, true, 0, big[300<<10:]),
		}, nil)
		go func() {
			// Dribble the frames out in uneven pieces.
			for off, i := 0, 0; off < len(frames); i++ {
				n := min(len(frames)-off, 1+(i*7919)%50000)
				if _, err := c.conn.Write(frames[off : off+n]); err != nil {
					return
				}
				off += n
			}
		}()
		f := c.mustRead()
		require.Equal(t, OpPong, f.op)
		f = c.mustRead()
		require.Equal(t, OpBinary, f.op)
		require.True(t, bytes.Equal(big, f.payload), "echo differs")
	})
}

func TestHandshake(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		srv, u := startWS(t, b, echoHandler(&events{}), WithSubprotocols("v2.chat", "v1.chat"))
		addr := srv.Addr().String()
		rejected := uint64(0)
		request := func(req string) (int, string) {
			c := rawDial(t, addr)
			c.write([]byte(req))
			return c.readHead()
		}
		const key = "dGhlIHNhbXBsZSBub25jZQ=="
		base := "Host: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + "\r\n"
		for _, tc := range []struct {
			name, req string
			status    int
			header    string
		}{
			{"4.2.1 POST", "POST /ws HTTP/1.1\r\n" + base + "Content-Length: 0\r\n\r\n", 405, "Allow: GET"},
			{"4.2.1 HTTP/1.0", "GET /ws HTTP/1.0\r\n" + base + "\r\n", 400, ""},
			{"4.2.1 no Upgrade", "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + "\r\n\r\n", 426, "Upgrade: websocket"},
			{"4.2.1 Upgrade: h2c", "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + "\r\n\r\n", 426, ""},
			{"4.2.1 Connection without upgrade", "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: keep-alive\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + "\r\n\r\n", 426, ""},
			{"4.4 version 8", "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 8\r\nSec-WebSocket-Key: " + key + "\r\n\r\n", 426, "Sec-WebSocket-Version: 13"},
			{"4.2.1 no key", "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n", 400, ""},
			{"4.2.1 key of 15 bytes", "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=\r\n\r\n", 400, ""},
			{"4.2.1 key not base64", "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: !!!!!!!!!!!!!!!!!!!!!!!!\r\n\r\n", 400, ""},
			{"10.2 foreign Origin", "GET /ws HTTP/1.1\r\n" + base + "Origin: https://evil.example\r\n\r\n", 403, ""},
			{"10.2 same Origin", "GET /ws HTTP/1.1\r\n" + base + "Origin: http://H\r\n\r\n", 101, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="},
			{"1.3 RFC example key", "GET /ws HTTP/1.1\r\n" + base + "\r\n", 101, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="},
			{"1.9 list tokens in any case", "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: foo, WebSocket\r\nConnection: keep-alive, UPGRADE\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + "\r\n\r\n", 101, ""},
			{"4.2.2 subprotocol by server preference", "GET /ws HTTP/1.1\r\n" + base + "Sec-WebSocket-Protocol: v1.chat, v2.chat\r\n\r\n", 101, "Sec-WebSocket-Protocol: v2.chat"},
			{"4.2.2 no deflate unless enabled", "GET /ws HTTP/1.1\r\n" + base + "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n", 101, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, head := request(tc.req)
				require.Equal(t, tc.status, status, head)
				if status != 101 {
					rejected++
				}
				if tc.header != "" {
					require.Contains(t, head, "\r\n"+tc.header+"\r\n")
				}
				if status == 101 {
					require.NotContains(t, strings.ToLower(head), "content-length")
					require.NotContains(t, head, "Sec-WebSocket-Extensions")
				}
			})
		}
		require.Equal(t, rejected, u.Stats().Rejected)
		// No common subprotocol: the connection opens without one.
		c := dialWS(t, addr, "Sec-WebSocket-Protocol: v3.chat")
		require.NotContains(t, c.resp, "Sec-WebSocket-Protocol")
		// Plain HTTP still works beside the upgrades.
		c = rawDial(t, addr)
		c.write([]byte("GET / HTTP/1.1\r\nHost: h\r\n\r\n"))
		status, _ := c.readHead()
		require.Equal(t, 200, status)
	})
}

// Bytes sent right behind the handshake request, in the same segment,
// are the first frame.
func TestFrameInHandshakeSegment(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		srv, _ := startWS(t, b, echoHandler(&events{}))
		c := rawDial(t, srv.Addr().String())
		req := "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
		c.write(append([]byte(req), mustMasked(OpText, true, 0, []byte("early"))...))
		status, _ := c.readHead()
		require.Equal(t, 101, status)
		f := c.mustRead()
		require.Equal(t, "early", string(f.payload))
	})
}

func TestKeepAlive(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		ev := &events{}
		srv, _ := startWS(t, b, echoHandler(ev), WithPing(30*time.Millisecond, 200*time.Millisecond))
		addr := srv.Addr().String()

		// A client that answers pings stays connected through several.
		c := dialWS(t, addr)
		for range 4 {
			f := c.mustRead()
			require.Equal(t, OpPing, f.op)
			c.send(OpPong, true, f.payload)
		}
		c.send(OpText, true, []byte("alive"))
		for {
			f := c.mustRead()
			if f.op == OpText {
				require.Equal(t, "alive", string(f.payload))
				break
			}
			require.Equal(t, OpPing, f.op)
			c.send(OpPong, true, f.payload)
		}

		// One that does not is dropped after the pong timeout.
		mute := dialWS(t, addr)
		require.Equal(t, OpPing, mute.mustRead().op)
		mute.expectEOF()
		require.Eventually(t, func() bool {
			for _, err := range ev.closeErrs() {
				if errors.Is(err, ErrPongTimeout) {
					return true
				}
			}
			return false
		}, 5*time.Second, time.Millisecond)
	})
}

// A handler that writes more than WithMaxPendingOutput in one callback
// (its output cannot have been sent yet) is refused with ErrOutputFull
// instead of buffering without bound.
func TestPendingOutputLimit(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		results := make(chan []error, 1)
		h := &HandlerFuncs{Message: func(c *Conn, typ MessageType, data []byte) {
			chunk := make([]byte, 100<<10)
			var errs []error
			for range 4 {
				errs = append(errs, c.WriteMessage(BinaryMessage, chunk))
			}
			results <- errs
		}}
		srv, _ := startWS(t, b, h, WithMaxPendingOutput(256<<10))
		c := dialWS(t, srv.Addr().String())
		c.send(OpText, true, []byte("go"))
		errs := <-results
		assert.NoError(t, errs[0])
		assert.NoError(t, errs[1])
		assert.ErrorIs(t, errs[2], ErrOutputFull)
		assert.ErrorIs(t, errs[3], ErrOutputFull)
		for range 2 {
			f := c.mustRead()
			require.Len(t, f.payload, 100<<10)
		}
	})
}

// A panicking handler closes only its own connection, and its OnClose
// still runs with the cause.
func TestHandlerPanicClosesOnlyItsConnection(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		ev := &events{}
		inner := echoHandler(ev)
		h := &HandlerFuncs{
			Open: inner.Open,
			Message: func(c *Conn, typ MessageType, data []byte) {
				if string(data) == "panic" {
					panic("handler bug")
				}
				inner.Message(c, typ, data)
			},
			Close: inner.Close,
		}
		srv, _ := startWS(t, b, h)
		good := dialWS(t, srv.Addr().String())
		bad := dialWS(t, srv.Addr().String())
		bad.send(OpText, true, []byte("panic"))
		bad.expectEOF()
		require.Eventually(t, func() bool { return len(ev.closeErrs()) == 1 }, 5*time.Second, time.Millisecond)
		err := ev.closeErrs()[0]
		assert.ErrorIs(t, err, vnet.ErrHandlerPanic)
		assert.ErrorIs(t, err, ErrAbnormalClosure)
		good.send(OpText, true, []byte("fine"))
		require.Equal(t, "fine", string(good.mustRead().payload))
	})
}

// The sending API's own checks, and what a handler can send besides
// WriteMessage.
func TestSendAPI(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		errs := make(chan []error, 1)
		h := &HandlerFuncs{Message: func(c *Conn, typ MessageType, data []byte) {
			errs <- []error{
				c.WriteText("reply"),
				c.Ping([]byte("srv")),
				c.Ping(make([]byte, 126)),
				c.Close(StatusNoStatusReceived, ""),
				c.Close(StatusNormalClosure, strings.Repeat("x", 124)),
				c.Close(StatusNormalClosure, "\xff"),
				c.WriteMessage(MessageType(OpPing), nil),
			}
		}}
		srv, _ := startWS(t, b, h)
		c := dialWS(t, srv.Addr().String())
		c.send(OpBinary, true, []byte("go"))
		got := <-errs
		require.NoError(t, got[0])
		require.NoError(t, got[1])
		require.ErrorIs(t, got[2], ErrControlTooLong)
		require.ErrorIs(t, got[3], ErrInvalidCloseCode)
		require.ErrorIs(t, got[4], ErrReasonTooLong)
		require.ErrorIs(t, got[5], ErrReasonTooLong)
		require.Error(t, got[6])
		f := c.mustRead()
		require.Equal(t, OpText, f.op)
		require.Equal(t, "reply", string(f.payload))
		f = c.mustRead()
		require.Equal(t, OpPing, f.op)
		require.Equal(t, "srv", string(f.payload))
		c.send(OpText, true, []byte("again")) // still open: none of the bad calls closed it
		<-errs
		require.Equal(t, "reply", string(c.mustRead().payload))
	})
}

// A producer paced with OutputBuffered and OnDrain streams 3 MiB to a
// reader (slower than the loop's writes) without its pending output
// passing its own bound, and every message arrives in order.
func TestOnDrainPacesProducer(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		const total, size, high = 400, 8 << 10, 64 << 10
		maxPending := make(chan int, 1)
		h := &HandlerFuncs{Open: func(c *Conn) {
			sent, peak := 0, 0
			var pump func()
			pump = func() {
				for sent < total && c.OutputBuffered() <= high {
					msg := bytes.Repeat([]byte{byte(sent)}, size)
					if err := c.WriteMessage(BinaryMessage, msg); err != nil {
						return
					}
					sent++
					peak = max(peak, c.OutputBuffered())
				}
				if sent == total {
					maxPending <- peak
					return
				}
				c.OnDrain(high/4, func() {
					if !c.Closed() {
						pump()
					}
				})
			}
			pump()
		}}
		srv, _ := startWS(t, b, h)
		c := dialWS(t, srv.Addr().String())
		for i := range total {
			f := c.mustRead()
			require.Len(t, f.payload, size)
			require.Equal(t, byte(i), f.payload[0], "message %d out of order", i)
		}
		require.LessOrEqual(t, <-maxPending, high+size+MaxHeaderLen)
	})
}

// Fields the HTTP handler sets before Upgrade go out with the 101.
func TestUpgradeKeepsHandlerHeaders(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		u := NewUpgrader(WithLogger(testLogger(t)))
		srv := vhttpServer(t, b, func(w *vhttp.ResponseWriter, r *vhttp.Request) {
			w.Header().Set("Set-Cookie", "session=abc")
			u.Upgrade(w, r, echoHandler(&events{}))
		})
		c := dialWS(t, srv.Addr().String())
		require.Contains(t, c.resp, "\r\nSet-Cookie: session=abc\r\n")
		c.send(OpText, true, []byte("x"))
		require.Equal(t, "x", string(c.mustRead().payload))
	})
}

// A client that sends requests back to back and reads nothing meanwhile:
// each small message is answered with a large one. The connection answers
// while its output is below the high-water mark, then leaves the rest of
// the input buffered until the output drains, so no answer fails with
// ErrOutputFull and the output stays near the mark plus one message.
// Answering every buffered frame at once queued all 200 answers (12.5 MiB)
// and the ones past WithMaxPendingOutput were lost.
func TestBackToBackMessagesWaitForDrain(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		const n, size = 200, 64 << 10
		answer := make([]byte, size)
		var failed atomic.Int64
		h := &HandlerFuncs{Message: func(c *Conn, typ MessageType, data []byte) {
			if err := c.WriteMessage(BinaryMessage, answer); err != nil {
				failed.Add(1)
			}
		}}
		srv, _ := startWS(t, b, h)
		c := dialWS(t, srv.Addr().String())
		var burst []byte
		for range n {
			burst = append(burst, mustMasked(OpText, true, 0, []byte("get"))...)
		}
		c.write(burst)
		for i := range n {
			f := c.mustRead()
			require.Len(t, f.payload, size, "answer %d", i)
		}
		require.Zero(t, failed.Load(), "answers refused with ErrOutputFull")
		var peak int64
		for _, st := range srv.NetServer().Stats() {
			peak = max(peak, st.PeakConnOutput)
		}
		t.Logf("%s: peak pending output: %d KiB", b, peak>>10)
		require.LessOrEqual(t, peak, int64(64<<10+size+1<<10))
	})
}
