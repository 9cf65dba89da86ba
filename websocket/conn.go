package websocket

import (
	"errors"
	"fmt"
	"net"
	"unicode/utf8"

	"github.com/veloq/veloq/bufpool"
	vnet "github.com/veloq/veloq/net"
)

// A MessageType is the type of a data message.
type MessageType uint8

// The message types (their values are the opcodes).
const (
	TextMessage   MessageType = MessageType(OpText)
	BinaryMessage MessageType = MessageType(OpBinary)
)

func (t MessageType) String() string { return Opcode(t).String() }

// A Handler receives a WebSocket connection's events. Every method runs on
// the connection's loop, one at a time, and must not block it (the rules
// of a [vnet.Handler] apply); hand slow work to the executor and answer
// with [Conn.AsyncWrite].
type Handler interface {
	// OnOpen runs once, right after the handshake, before any message.
	OnOpen(c *Conn)
	// OnMessage runs for every complete message. data is a view valid
	// only until OnMessage returns: for a single-frame uncompressed
	// message it is the payload unmasked in place in the loop's input
	// buffer; copy what you keep.
	OnMessage(c *Conn, typ MessageType, data []byte)
	// OnClose runs once when the connection is gone. err is nil when this
	// side closed it with Close and the peer answered; a *CloseError when
	// the peer started the close handshake; a *ProtocolError (errors.Is
	// ErrProtocol) when the peer broke the protocol or a limit and was
	// failed with that code; ErrPongTimeout or ErrCloseTimeout when a
	// timer ran out; and otherwise an error wrapping ErrAbnormalClosure
	// and the transport's cause (the TCP connection ended without a close
	// frame).
	OnClose(c *Conn, err error)
}

// ShutdownHandler is implemented by a [Handler] that wants to act when the
// server shuts down gracefully (the Shutdown of the HTTP server the
// connection was upgraded on): OnShutdown runs on each open connection,
// on its loop, before the server starts the close handshake with 1001
// (going away). It may send a last message, or call Close with a code
// and reason of its own, which the server's close then leaves alone.
type ShutdownHandler interface {
	OnShutdown(c *Conn)
}

// HandlerFuncs adapts functions to [Handler]; nil fields do nothing.
type HandlerFuncs struct {
	Open    func(c *Conn)
	Message func(c *Conn, typ MessageType, data []byte)
	Close   func(c *Conn, err error)
}

// OnOpen calls f.Open.
func (f *HandlerFuncs) OnOpen(c *Conn) {
	if f.Open != nil {
		f.Open(c)
	}
}

// OnMessage calls f.Message.
func (f *HandlerFuncs) OnMessage(c *Conn, typ MessageType, data []byte) {
	if f.Message != nil {
		f.Message(c, typ, data)
	}
}

// OnClose calls f.Close.
func (f *HandlerFuncs) OnClose(c *Conn, err error) {
	if f.Close != nil {
		f.Close(c, err)
	}
}

// The connection's states.
const (
	stateOpen      uint8 = iota
	stateCloseSent       // our close frame is out; waiting for the peer's
	stateClosed          // no frame is read any more: the TCP connection lingers (see linger), is closing or closed
)

// A Conn is a WebSocket connection served on a reactor loop. Its methods
// run on the loop (inside Handler callbacks, or closures posted with
// Loop().Post), except those that say they are safe from any goroutine.
type Conn struct {
	nc         *vnet.Conn
	h          Handler
	u          *Upgrader
	dec        Decoder
	msg        []byte // the fragmented message being assembled (pooled)
	value      any
	keepAlive  *vnet.Timer
	closeTimer *vnet.Timer
	err        error // reported to OnClose
	state      uint8
	deflate    bool
	pongDue    bool   // a keep-alive ping is waiting for its pong
	draining   bool   // the server's Shutdown reached it (Stats.Drained, Stats.Cut)
	subproto   uint16 // the negotiated subprotocol: its place in the Upgrader's list + 1; 0 for none
}

// NetConn returns the underlying reactor connection (for Fd, Stats and
// the like). Do not read from it or write to it.
func (c *Conn) NetConn() *vnet.Conn { return c.nc }

// Loop returns the connection's loop. Safe from any goroutine.
func (c *Conn) Loop() *vnet.Loop { return c.nc.Loop() }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Subprotocol returns the negotiated subprotocol, or "".
func (c *Conn) Subprotocol() string {
	if c.subproto == 0 {
		return ""
	}
	return c.u.cfg.subprotocols[c.subproto-1]
}

// Compressed reports whether permessage-deflate was negotiated.
func (c *Conn) Compressed() bool { return c.deflate }

// Value returns the value set with SetValue (nil if none).
func (c *Conn) Value() any { return c.value }

// SetValue stores a per-connection value for the handler.
func (c *Conn) SetValue(v any) { c.value = v }

// OutputBuffered returns the bytes written to the connection and not yet
// sent: the measure of a slow reader.
func (c *Conn) OutputBuffered() int { return c.nc.OutputBuffered() }

// OnDrain runs fn on the loop once pending output is at most limit bytes
// (at once, deferred, if it already is; also when the connection closes:
// fn checks Closed). It is how a producer waits for a slow reader.
func (c *Conn) OnDrain(limit int, fn func()) { c.nc.OnDrain(limit, fn) }

// Closed reports whether the connection is closing or closed: no message
// can be sent any more.
func (c *Conn) Closed() bool { return c.state != stateOpen || c.nc.Closed() }

// WriteMessage sends one unfragmented message. The frame's header and
// payload are appended to the connection's output in one step and sent
// with the loop's next flush; p may be reused when WriteMessage returns.
// Text messages are not checked for UTF-8: sending valid UTF-8 is the
// caller's part. With permessage-deflate negotiated, payloads from the
// WithCompression size on are compressed.
//
// It returns ErrClosed once the connection is closing and ErrOutputFull
// (writing nothing) when the pending output would pass the
// WithMaxPendingOutput limit.
func (c *Conn) WriteMessage(typ MessageType, p []byte) error {
	if typ != TextMessage && typ != BinaryMessage {
		return fmt.Errorf("websocket: WriteMessage with message type %d", typ)
	}
	if err := c.admit(len(p)); err != nil {
		return err
	}
	if c.deflate && len(p) >= c.u.cfg.compressMin {
		buf := c.u.pool.Get(len(p)/2 + 64)[:0]
		z := c.u.flate.compress(buf, p)
		err := c.writeFrame(Opcode(typ), Rsv1, z)
		c.u.pool.Put(z)
		return err
	}
	return c.writeFrame(Opcode(typ), 0, p)
}

// WriteText sends s as a text message, like WriteMessage(TextMessage,
// []byte(s)). Uncompressed, s is copied once, into the output.
func (c *Conn) WriteText(s string) error {
	if c.deflate && len(s) >= c.u.cfg.compressMin {
		return c.WriteMessage(TextMessage, []byte(s))
	}
	if err := c.admit(len(s)); err != nil {
		return err
	}
	var hdr [MaxHeaderLen]byte
	h := Header{Fin: true, Opcode: OpText, Length: int64(len(s))}
	if _, err := c.nc.Write(hdr[:PutHeader(hdr[:], &h)]); err != nil {
		return err
	}
	_, err := c.nc.WriteString(s)
	return err
}

// admit checks that a message of n bytes may be queued: the connection is
// open and its pending output stays within WithMaxPendingOutput.
func (c *Conn) admit(n int) error {
	if c.Closed() {
		return ErrClosed
	}
	if c.nc.OutputBuffered()+n > c.u.cfg.maxPendingOutput {
		c.u.stats.outputFull.Add(1)
		return ErrOutputFull
	}
	return nil
}

// Ping sends a ping with payload p (at most 125 bytes). The peer's pong
// is absorbed; keep-alive uses pings of its own (WithPing).
func (c *Conn) Ping(p []byte) error {
	if len(p) > MaxControlPayload {
		return ErrControlTooLong
	}
	if c.Closed() {
		return ErrClosed
	}
	return c.writeFrame(OpPing, 0, p)
}

// Close starts the close handshake (RFC 6455 §7.1.2): it sends a close
// frame with code and reason, drops data messages that still arrive, and
// closes the TCP connection when the peer's close frame comes back (a
// half-close, then the close on the peer's FIN), or after the
// WithCloseHandshakeTimeout delay. OnClose follows. code must be one a
// close frame may carry (StatusCode.Valid); reason at most 123 bytes of
// UTF-8. It returns ErrClosed if the connection is already closing.
func (c *Conn) Close(code StatusCode, reason string) error {
	if !code.Valid() {
		return ErrInvalidCloseCode
	}
	if len(reason) > MaxCloseReason || !utf8.ValidString(reason) {
		return ErrReasonTooLong
	}
	if c.Closed() {
		return ErrClosed
	}
	c.writeClose(code, reason)
	c.state = stateCloseSent
	c.stopKeepAlive()
	c.closeTimer = c.nc.AfterFunc(c.u.cfg.closeTimeout, c.closeTimedOut)
	return nil
}

// closeTimedOut ends a close that took longer than the close handshake
// timeout: the peer did not answer our close frame, or after the close
// frames it kept its side of the TCP connection open (see linger).
func (c *Conn) closeTimedOut() {
	if c.state == stateCloseSent {
		c.err = ErrCloseTimeout
	}
	c.state = stateClosed
	c.nc.Close()
}

// linger ends the TCP connection once no frame is to be read any more
// (both close frames went, or the peer was failed): it half-closes after
// the pending output, then discards input until the peer's FIN closes the
// connection, for at most the close handshake timeout. Closing at once
// made the kernel answer what the peer still sent (its answer to our close
// frame, data after its own close) with a reset, which may destroy our
// close frame before the peer reads it: 108–152 closes in 1,000, on both
// backends. RFC 6455 §7.1.1 wants the server to close the TCP connection
// first and the client to wait for it, which the half-close is; the HTTP
// server's linger does the same after an error response.
func (c *Conn) linger() {
	c.state = stateClosed
	c.stopKeepAlive()
	nc := c.nc
	nc.Discard(-1)
	nc.ResumeRead() // the peer's FIN must be seen
	if nc.CloseWrite() != nil {
		nc.Close()
		return
	}
	if c.closeTimer != nil {
		c.closeTimer.Reset(c.u.cfg.closeTimeout)
	} else {
		c.closeTimer = nc.AfterFunc(c.u.cfg.closeTimeout, c.closeTimedOut)
	}
}

// AsyncWrite sends a message from any goroutine: it posts WriteMessage to
// the connection's loop and calls done (if not nil) there with its
// result. p is handed over: do not modify it until done runs. Messages
// posted by one goroutine are sent in the order posted. It returns an
// error only when the loop has stopped.
func (c *Conn) AsyncWrite(typ MessageType, p []byte, done func(error)) error {
	return c.nc.Loop().Post(func() {
		err := c.WriteMessage(typ, p)
		if done != nil {
			done(err)
		}
	})
}

// AsyncClose is Close from any goroutine.
func (c *Conn) AsyncClose(code StatusCode, reason string) error {
	return c.nc.Loop().Post(func() { c.Close(code, reason) })
}

// writeFrame appends one final frame to the output: the header from a
// stack buffer and the payload, in one Writev (one grow of the output).
func (c *Conn) writeFrame(op Opcode, rsv uint8, p []byte) error {
	var hdr [MaxHeaderLen]byte
	h := Header{Fin: true, Rsv: rsv, Opcode: op, Length: int64(len(p))}
	n := PutHeader(hdr[:], &h)
	if len(p) == 0 {
		_, err := c.nc.Write(hdr[:n])
		return err
	}
	bufs := [2][]byte{hdr[:n], p}
	_, err := c.nc.Writev(bufs[:])
	return err
}

// writeClose sends a close frame.
func (c *Conn) writeClose(code StatusCode, reason string) {
	var b [MaxControlPayload]byte
	p := AppendClosePayload(b[:0], code, reason[:min(len(reason), MaxCloseReason)])
	c.writeFrame(OpClose, 0, p)
}

// fail closes the connection for err, a protocol error by the peer: a
// close frame with its code, then the TCP close (§7.1.7).
func (c *Conn) fail(err error) {
	if c.state == stateClosed {
		return
	}
	var pe *ProtocolError
	if c.state == stateOpen && errors.As(err, &pe) {
		c.writeClose(pe.Code, pe.Reason)
		c.u.cfg.logger.Debug("websocket: failing connection", "remote", c.nc.RemoteAddr(), "err", err)
	}
	if c.err == nil {
		c.err = err
	}
	c.linger()
}

// handleChunk acts on one decoded chunk.
func (c *Conn) handleChunk(ch *Chunk) {
	switch ch.Opcode {
	case OpPing:
		if c.state == stateOpen {
			c.writeFrame(OpPong, 0, ch.Payload)
		}
	case OpPong:
		if c.pongDue {
			c.pongDue = false
			c.keepAlive.Reset(c.u.cfg.pingInterval)
		}
	case OpClose:
		if c.state == stateOpen {
			// The peer starts the handshake: echo its code, then close
			// the TCP connection ourselves, as the server should (§7.1.1).
			c.err = &CloseError{Code: ch.CloseCode, Reason: string(ch.CloseReason)}
			c.writeClose(ch.CloseCode, "")
		}
		c.linger()
	default:
		c.handleData(ch)
	}
}

// handleData delivers a data chunk: a whole message straight from the
// input buffer, the rest through the assembly buffer.
func (c *Conn) handleData(ch *Chunk) {
	if ch.First && ch.Final && !ch.Compressed {
		if c.state == stateOpen {
			c.h.OnMessage(c, MessageType(ch.Opcode), ch.Payload)
		}
		return
	}
	if c.state != stateOpen {
		// Closing: the message will not be delivered, so keep nothing.
		if c.msg != nil {
			c.u.pool.Put(c.msg)
			c.msg = nil
		}
		return
	}
	if len(ch.Payload) > 0 {
		c.msg = appendPooled(c.u.pool, c.msg, ch.Payload)
	}
	if !ch.Final {
		return
	}
	msg := c.msg
	c.msg = nil
	defer c.u.pool.Put(msg)
	if ch.Compressed {
		out, err := c.u.flate.inflate(c.u.pool.Get(max(2*len(msg), 512))[:0], msg, c.u.cfg.maxMessage)
		defer c.u.pool.Put(out)
		if err != nil {
			c.fail(err)
			return
		}
		if ch.Opcode == OpText && !utf8.Valid(out) {
			c.fail(errTextUTF8)
			return
		}
		msg = out
	}
	if c.state == stateOpen {
		c.h.OnMessage(c, MessageType(ch.Opcode), msg)
	}
}

// appendPooled appends p to b, moving b to a larger pooled buffer when
// it is full (the old one goes back to the pool).
func appendPooled(pool *bufpool.Pool, b, p []byte) []byte {
	if len(b)+len(p) <= cap(b) {
		return append(b, p...)
	}
	nb := pool.Get(max(2*cap(b), len(b)+len(p), 512))[:len(b)]
	copy(nb, b)
	if b != nil {
		pool.Put(b)
	}
	return append(nb, p...)
}

func (c *Conn) startKeepAlive() {
	d := c.u.cfg.pingInterval
	if d <= 0 {
		return
	}
	c.keepAlive = c.nc.AfterFunc(d, c.keepAliveTick)
}

// keepAliveTick sends a ping, or gives up on a peer that did not answer
// the previous one.
func (c *Conn) keepAliveTick() {
	if c.state != stateOpen {
		return
	}
	if c.pongDue {
		c.err = ErrPongTimeout
		c.state = stateClosed
		c.nc.Abort(ErrPongTimeout) // the peer is gone or stuck: drop its output
		return
	}
	c.writeFrame(OpPing, 0, nil)
	c.pongDue = true
	c.keepAlive.Reset(c.u.cfg.pongTimeout)
}

func (c *Conn) stopKeepAlive() {
	c.keepAlive.Stop()
	c.pongDue = false
}

// loopHandler is a Conn seen by the reactor: the same memory, a type
// whose methods are the vnet.Handler the HTTP server hands the
// connection to, kept off Conn's own method set. Converting between the
// two pointer types is free (same underlying struct).
type loopHandler Conn

func (l *loopHandler) OnOpen(nc *vnet.Conn) {
	c := (*Conn)(l)
	// Counted here, not when Upgrade returns: OnOpen pairs one to one with
	// OnClose, which a handler that panics after Upgrade never reaches.
	c.u.stats.upgrades.Add(1)
	c.u.stats.open.Add(1)
	c.startKeepAlive()
	c.h.OnOpen(c)
}

func (l *loopHandler) OnData(nc *vnet.Conn) {
	c := (*Conn)(l)
	if c.state == stateClosed {
		nc.Discard(-1) // lingering: only the peer's FIN matters now
		return
	}
	// A peer that sends frames and reads nothing (pings, or messages the
	// handler answers) must not make the output grow with every frame
	// buffered: past the high-water mark the rest waits in the input,
	// where reading has stopped, and comes back when the output drains.
	for !nc.Closed() && !nc.Backlogged() {
		b, _ := nc.Peek(0)
		if len(b) == 0 {
			return
		}
		ch, n, err := c.dec.Next(b)
		if err == ErrNeedMore {
			return
		}
		if err != nil {
			c.fail(err)
			return
		}
		nc.Discard(n)
		c.handleChunk(&ch)
	}
}

func (l *loopHandler) OnClose(nc *vnet.Conn, err error) {
	c := (*Conn)(l)
	c.keepAlive.Stop()
	c.closeTimer.Stop()
	if c.msg != nil {
		c.u.pool.Put(c.msg)
		c.msg = nil
	}
	if c.err == nil && c.state != stateClosed {
		// The TCP connection ended without a close handshake finishing.
		// (Once it finished, how the TCP connection ends does not change
		// the outcome: the peer's FIN ends the linger as io.EOF, and a
		// peer that resets instead had its close frame already.)
		if err == nil {
			err = vnet.ErrClosed
		}
		c.err = fmt.Errorf("%w: %w", ErrAbnormalClosure, err)
	}
	c.state = stateClosed
	st := &c.u.stats
	st.open.Add(-1)
	if c.draining {
		if errors.Is(err, vnet.ErrClosed) {
			st.cut.Add(1)
		} else {
			st.drained.Add(1)
		}
	}
	var ce *CloseError
	switch {
	case c.err == nil, errors.Is(c.err, ErrCloseTimeout):
		st.locally.Add(1)
	case errors.As(c.err, &ce):
		st.byPeer.Add(1)
	case errors.Is(c.err, ErrProtocol):
		st.protocol.Add(1)
	default:
		st.abnormal.Add(1)
	}
	c.h.OnClose(c, c.err)
}

// OnShutdown runs when the server's Shutdown starts (see
// vnet.ShutdownHandler): the handler's own OnShutdown first, if it has
// one, then, unless it closed the connection, the close handshake with
// 1001 (going away), so that the client reconnects, to the process that
// took over after a hot upgrade say. The handshake completes, or times
// out after WithCloseHandshakeTimeout, or is cut at Shutdown's deadline.
func (l *loopHandler) OnShutdown(nc *vnet.Conn) {
	c := (*Conn)(l)
	if c.state != stateOpen {
		return
	}
	c.draining = true
	if sh, ok := c.h.(ShutdownHandler); ok {
		sh.OnShutdown(c)
	}
	if c.Close(StatusGoingAway, "server shutting down") == nil {
		c.u.stats.goingAway.Add(1)
	}
}

// Keep the compiler honest about the conversion above.
var (
	_ vnet.Handler         = (*loopHandler)(nil)
	_ vnet.ShutdownHandler = (*loopHandler)(nil)
)
