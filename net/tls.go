package net

// TLS as a layer of the connection, under every protocol.
//
// A server started WithTLS accepts through tlsAcceptor, a Handler of its
// own, and its connections carry a tlsLayer (in connAux). Handlers see
// plaintext: onInput hands ciphertext to the layer, which returns the
// plaintext it decrypted, and that plaintext is presented exactly like a
// plaintext connection's input (holds, ReadBufferCap, OnData); Write,
// Writev, WriteString and AsyncWrite encrypt through the layer into the
// output queue, so the water marks count ciphertext. No protocol package
// learns about TLS.
//
// The layer drives a standard crypto/tls Conn over tlsTransport, a
// net.Conn of its own. A connection's layer goes through:
//
//	handshaking ──handshake done, handed over (posted)──▶ live
//	     │
//	     └── handshake failed, timed out, or connection closed ──▶ closed
//	         (the user's handler never saw the connection)
//
//   - handshaking: the handshake runs on a goroutine, since it waits on
//     the peer and crypto/tls cannot resume a handshake after a would-block
//     error (its handshake error is sticky). Its transport blocks: Read
//     waits for ciphertext the loop appends (under tlsTransport.mu), and
//     Write posts a copy of the bytes to the loop, which queues them;
//     crypto/tls makes any write error permanent, so every byte is
//     accepted. The loop keeps the connection's timer (handshake timeout)
//     and stops reading past maxHandshakeInput. The user's handler gets
//     nothing yet; the peer's FIN is kept for after the hand-over.
//   - live: the goroutine posted the hand-over and ended; from then on
//     only the loop touches the tls.Conn, and the connection holds no
//     goroutine. The transport's Read returns the ciphertext of the
//     current input report, then a temporary net.Error (crypto/tls does
//     not keep temporary errors, so records may be split anywhere), and
//     Write queues on the output directly. The hand-over first decrypts
//     what the handshake goroutine already pulled in (the client's first
//     request can arrive with its Finished), after OnOpen.
//
// Counters: Stats.TLSHandshakes, TLSHandshakeErrors, TLSHandshakeTimeouts
// and TLSRefused.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTLSHandshakeTimeout closes a connection whose TLS handshake did not
// finish within the handshake timeout (WithTLSHandshakeTimeout).
var ErrTLSHandshakeTimeout = errors.New("veloq: TLS handshake timed out")

// ErrTLSHandshakeLimit closes a new TLS connection at once when the
// server already runs its maximum of concurrent handshakes
// (WithMaxTLSHandshakes).
var ErrTLSHandshakeLimit = errors.New("veloq: too many TLS handshakes in progress")

// ErrTLS is wrapped by the error a TLS connection closes with when its
// peer sent something crypto/tls rejected (a bad record, a failed
// handshake, an alert); errors.As finds crypto/tls's own error beside it.
var ErrTLS = errors.New("veloq: tls")

// Defaults of the TLS layer.
const (
	// DefaultTLSHandshakeTimeout bounds a handshake (net/http has none;
	// nginx's client_header_timeout, 60 s, covers it there).
	DefaultTLSHandshakeTimeout = 10 * time.Second
	// DefaultMaxTLSHandshakes bounds the handshakes running at once, each
	// a goroutine and tens of KB of state while the peer answers.
	DefaultMaxTLSHandshakes = 4096
)

// maxHandshakeInput is how much ciphertext the loop buffers for a
// handshake before it stops reading: a handshake message is at most 64 KiB
// (crypto/tls's own bound), and what a peer sends after its Finished waits
// for the hand-over.
const maxHandshakeInput = 128 << 10

// tlsServer is a server's TLS configuration and its handshake bound,
// shared by its listeners.
type tlsServer struct {
	cfg     *tls.Config
	timeout time.Duration
	max     int64
	running atomic.Int64
	// cpu holds a token for each handshake goroutine that may compute at
	// once: GOMAXPROCS minus the loops, at least one. A handshake gives
	// its token back whenever it waits for the peer. A loop that returns
	// from the kernel needs a P to run on; with more handshakes computing
	// than spare Ps it queues behind them in Go's run queues, and a flood
	// of handshakes stalls every established connection of the loop.
	// Measured (one loop on CPU 0, 1,000 clients handshaking in a loop on
	// CPU 1, a keep-alive HTTPS ping on CPU 1, 3 rounds): without the
	// tokens the ping's median was 0.17 ms in two rounds and 143 ms in
	// the third (max 1.7 s), net/http's 0.2, 236 and 300 ms; with them
	// 0.17-0.26 ms in every round, p99 5.7-11 ms. nil (a dial): no limit.
	cpu chan struct{}
}

// limitCPU sizes the handshakes' share of the Ps for a server of loops
// loops.
func (ts *tlsServer) limitCPU(loops int) {
	ts.cpu = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-loops))
}

// tlsAcceptor is the listener's handler of a TLS server, and the handler
// of a TLS dial until its handshake is done: it starts each connection's
// handshake and hands the connection to the user's handler when it is
// done.
type tlsAcceptor struct {
	ts    *tlsServer
	inner Handler
}

// tlsLayer is one connection's TLS state.
type tlsLayer struct {
	tc      *tls.Conn
	tr      tlsTransport
	ts      *tlsServer // while it counts in ts.running; nil after
	inner   Handler
	client  bool                 // a DialTLS connection: its handshake starts at the connect
	pending []byte               // plaintext a client wrote before its hand-over
	started bool                 // the handshake goroutine runs (loop only)
	live    bool                 // handed over (loop only)
	fin     bool                 // the peer's FIN came during the handshake
	state   *tls.ConnectionState // set at the hand-over, for Conn.TLS
	timer   *Timer               // handshake timeout
}

// tlsTransport is the net.Conn under a connection's tls.Conn.
type tlsTransport struct {
	c *Conn

	// handshaking: shared with the handshake goroutine
	mu   sync.Mutex
	cond sync.Cond
	raw  []byte // ciphertext the handshake has not read yet
	rerr error  // why reading ended (the FIN, a close), after raw

	wbuf []byte // what the handshake wrote since its last flush (its goroutine's)

	// The first record cut in pieces (splitFirst), the handshake
	// goroutine's: whether it was looked at, the bytes of pieces still in
	// raw, and of those the bytes of the piece being read.
	firstSeen  bool
	piecesLeft int32
	pieceLeft  int32

	// live: the loop's alone
	live bool
	cur  []byte // ciphertext of the input report being decrypted

	cpu chan struct{} // the server's handshake CPU tokens (tlsServer.cpu)
}

// errWouldBlock ends a live transport's Read when the current input is
// used up. crypto/tls keeps no net.Error whose Temporary is true, so the
// next Read goes on where the record left off.
var errWouldBlock error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "veloq: tls transport: no more input yet" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }

func (t *tlsTransport) Read(p []byte) (int, error) {
	if t.live {
		if len(t.cur) == 0 {
			return 0, errWouldBlock
		}
		n := copy(p, t.cur)
		t.cur = t.cur[n:]
		return n, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mustWait() {
		// Waiting on the peer, who waits for what was written; another
		// handshake may compute meanwhile.
		if err := t.flush(); err != nil {
			return 0, err
		}
		t.yieldCPU()
		for t.mustWait() {
			t.cond.Wait()
		}
		t.mu.Unlock()
		t.takeCPU()
		t.mu.Lock()
	}
	if len(t.raw) == 0 {
		return 0, t.rerr
	}
	if !t.firstSeen {
		t.splitFirst()
	}
	lim := len(p)
	if t.piecesLeft > 0 {
		// One piece at a time, so that crypto/tls's record buffer, sized
		// by its first read, holds each whole and never grows.
		if t.pieceLeft == 0 {
			t.pieceLeft = min(t.piecesLeft, 5+tlsPiece)
		}
		lim = min(lim, int(t.pieceLeft))
	}
	n := copy(p[:lim], t.raw)
	t.raw = t.raw[n:]
	if t.piecesLeft > 0 {
		t.piecesLeft -= int32(n)
		t.pieceLeft -= int32(n)
	}
	if len(t.raw) == 0 {
		t.raw = nil
	}
	return n, nil
}

// The first record a handshake reads, a ClientHello (or a client's
// ServerHello), is a plaintext handshake record of about 1.5 KB when the
// client offers the post-quantum hybrid key share X25519MLKEM768, as
// browsers and Go's client now do. crypto/tls reads records into a buffer
// that keeps the largest size it ever needed for the life of the
// connection, 2 KB for such a record, though every later record of an
// idle or request/response connection is far smaller. So the transport
// hands that record over cut into records of at most tlsPiece bytes:
// TLS lets a handshake message span records (RFC 8446 §5.1, RFC 5246
// §6.2.1) and crypto/tls reassembles it (the transcript hashes messages,
// not records), and its record buffer stays at its first size, 576 bytes.
// The cut is made only in a record that would not fit that size
// (tlsPieceOver), and at 384 bytes: the buffer crypto/tls reassembles the
// message in then grows by the same steps as for the whole record (384,
// 768, 1,536 bytes), so it ends no larger. Measured on an idle HTTP/2
// connection (bench/h2mem.sh): about 1.4 KB less heap each.
const (
	tlsPiece     = 384
	tlsPieceOver = 512
	// tlsMaxRecord is the largest record the cut is made in (TLS's
	// plaintext limit); crypto/tls refuses a larger one anyway.
	tlsMaxRecord = 1 << 14
)

// mustWait reports whether Read has to wait for the peer: nothing is
// buffered, or the first record, if it is a handshake record to cut, is
// not all here yet (crypto/tls would wait for the rest too).
func (t *tlsTransport) mustWait() bool {
	if t.rerr != nil {
		return false
	}
	if len(t.raw) == 0 {
		return true
	}
	if t.firstSeen {
		return false
	}
	if len(t.raw) < 5 {
		return true
	}
	n := int(t.raw[3])<<8 | int(t.raw[4])
	return t.raw[0] == recordTypeHandshake && n > tlsPieceOver && n <= tlsMaxRecord && len(t.raw) < 5+n
}

// recordTypeHandshake is a TLS record's content type for handshake
// messages (RFC 8446 §5.1).
const recordTypeHandshake = 22

// splitFirst cuts the first record in raw into pieces (see tlsPiece) when
// it is a whole plaintext handshake record over tlsPieceOver bytes.
func (t *tlsTransport) splitFirst() {
	t.firstSeen = true
	raw := t.raw
	if len(raw) < 5 || raw[0] != recordTypeHandshake {
		return
	}
	n := int(raw[3])<<8 | int(raw[4])
	if n <= tlsPieceOver || n > tlsMaxRecord || len(raw) < 5+n {
		return
	}
	pieces := (n + tlsPiece - 1) / tlsPiece
	out := make([]byte, 0, len(raw)+5*(pieces-1))
	for body := raw[5 : 5+n]; len(body) > 0; {
		k := min(len(body), tlsPiece)
		out = append(out, raw[0], raw[1], raw[2], byte(k>>8), byte(k))
		out = append(out, body[:k]...)
		body = body[k:]
	}
	t.piecesLeft = int32(len(out))
	t.raw = append(out, raw[5+n:]...)
}

func (t *tlsTransport) Write(p []byte) (int, error) {
	c := t.c
	if t.live {
		c.loop.writeRaw(c, p)
		return len(p), nil
	}
	// Kept until the handshake waits for the peer or ends (flush): a
	// server's flight and its session tickets, two writes, leave in one
	// post and one send.
	t.wbuf = append(t.wbuf, p...)
	return len(p), nil
}

// flush posts what the handshake wrote since the last flush to the loop,
// which queues it on the connection's output.
func (t *tlsTransport) flush() error {
	if len(t.wbuf) == 0 {
		return nil
	}
	b, c := t.wbuf, t.c
	t.wbuf = nil
	return c.loop.Post(func() { c.loop.writeRaw(c, b) })
}

// takeCPU waits for a handshake CPU token; yieldCPU gives it back.
func (t *tlsTransport) takeCPU() {
	if t.cpu != nil {
		t.cpu <- struct{}{}
	}
}

func (t *tlsTransport) yieldCPU() {
	if t.cpu != nil {
		<-t.cpu
	}
}

// Close ends a handshake's reading: crypto/tls calls it when it gives up,
// and the loop (through end) when the connection goes away.
func (t *tlsTransport) Close() error {
	t.end(net.ErrClosed)
	return nil
}

// end makes the handshake's reads return err once the buffered ciphertext
// is read.
func (t *tlsTransport) end(err error) {
	t.mu.Lock()
	if t.rerr == nil {
		t.rerr = err
	}
	t.cond.Broadcast()
	t.mu.Unlock()
}

func (t *tlsTransport) LocalAddr() net.Addr              { return t.c.laddr }
func (t *tlsTransport) RemoteAddr() net.Addr             { return t.c.raddr }
func (t *tlsTransport) SetDeadline(time.Time) error      { return nil }
func (t *tlsTransport) SetReadDeadline(time.Time) error  { return nil }
func (t *tlsTransport) SetWriteDeadline(time.Time) error { return nil }

// feed appends ciphertext for the handshake and returns how much waits.
func (t *tlsTransport) feed(b []byte) (buffered int) {
	t.mu.Lock()
	t.raw = append(t.raw, b...)
	n := len(t.raw)
	t.cond.Signal()
	t.mu.Unlock()
	return n
}

// OnOpen starts the handshake, unless too many are running.
func (a *tlsAcceptor) OnOpen(c *Conn) {
	l := c.loop
	ts := a.ts
	t := c.tlsLayer() // a dial's, attached by DialTLS
	if t == nil {
		if ts.running.Add(1) > ts.max {
			ts.running.Add(-1)
			l.stats.tlsRefused.Add(1)
			c.err = ErrTLSHandshakeLimit
			l.closeGracefully(c)
			return
		}
		t = newTLSLayer(c, a.inner, ts)
		t.tc = tls.Server(&t.tr, ts.cfg)
	}
	t.timer = c.AfterFunc(ts.timeout, func() {
		if !t.live && c.state == connOpen {
			l.stats.tlsTimeouts.Add(1)
			l.abort(c, ErrTLSHandshakeTimeout)
		}
	})
	if t.client {
		t.start(c) // a client speaks first
	}
}

// start runs the handshake goroutine, once. A server's starts with the
// first ciphertext from the peer rather than at the accept: the goroutine
// then finds its ClientHello waiting instead of parking for it and being
// woken (one thread handoff fewer per handshake), and a peer that
// connects and says nothing costs no goroutine.
func (t *tlsLayer) start(c *Conn) {
	if !t.started {
		t.started = true
		go handshake(c, t)
	}
}

// newTLSLayer attaches a TLS layer to c: a server's counted in
// ts.running, a dial's (ts nil) counted nowhere and not CPU-limited.
func newTLSLayer(c *Conn, inner Handler, ts *tlsServer) *tlsLayer {
	t := &tlsLayer{inner: inner, ts: ts}
	t.tr.c = c
	if ts != nil {
		t.tr.cpu = ts.cpu
	}
	t.tr.cond.L = &t.tr.mu
	c.more().tls = t
	return t
}

// OnData cannot run: a handshaking connection's input goes to the layer.
func (a *tlsAcceptor) OnData(c *Conn) {}

// OnEOF keeps the peer's FIN for after the handshake: a client may send
// its Finished, a request and its FIN in one go.
func (a *tlsAcceptor) OnEOF(c *Conn) {
	x := c.aux
	if x == nil || x.tls == nil {
		return
	}
	if !x.tls.started {
		// Nothing was said (a TCP health check): close, no handshake.
		c.err = io.EOF
		c.loop.closeGracefully(c)
		return
	}
	x.tls.fin = true
	x.tls.tr.end(io.EOF)
}

// OnClose wakes a handshake still waiting for the peer.
func (a *tlsAcceptor) OnClose(c *Conn, err error) {
	if x := c.aux; x != nil && x.tls != nil {
		x.tls.handshakeOver()
		x.tls.tr.end(net.ErrClosed)
	}
}

// handshakeOver takes the connection out of its server's count of running
// handshakes, once. The count follows the loop's view (handshaking until
// handed over, failed or closed), so a place is free again as soon as the
// loop is done with a connection, not when its goroutine gets to run.
func (t *tlsLayer) handshakeOver() {
	if t.ts != nil {
		t.ts.running.Add(-1)
		t.ts = nil
	}
}

// handshake runs a connection's handshake on its own goroutine and posts
// the outcome to the loop.
func handshake(c *Conn, t *tlsLayer) {
	t.tr.takeCPU()
	err := t.tc.Handshake()
	t.tr.yieldCPU()
	l := c.loop
	// The last writes (an alert, a client's Finished) go in the same
	// post as the outcome, ahead of it.
	last := t.tr.wbuf
	t.tr.wbuf = nil
	_ = l.Post(func() { // ErrClosed: the loop stopped and closed c
		if len(last) > 0 {
			l.writeRaw(c, last)
		}
		if err != nil {
			l.tlsFailed(c, t, err)
			return
		}
		l.tlsHandOver(c, t)
	})
}

// tlsFailed closes a connection whose handshake failed, after the alert
// crypto/tls queued before it gave up.
func (l *Loop) tlsFailed(c *Conn, t *tlsLayer, err error) {
	t.timer.Stop()
	t.handshakeOver()
	if c.state != connOpen {
		return // timed out, or closed by the peer or the loop
	}
	l.stats.tlsErrors.Add(1)
	l.log.Debug("veloq: TLS handshake failed", "remote", c.raddr, "err", err)
	c.err = fmt.Errorf("%w: handshake: %w", ErrTLS, err)
	l.closeGracefully(c)
}

// tlsHandOver makes a connection whose handshake succeeded live: the
// user's handler gets OnOpen, then the plaintext of whatever ciphertext
// came with or after the peer's Finished, then the FIN if one came.
func (l *Loop) tlsHandOver(c *Conn, t *tlsLayer) {
	t.timer.Stop()
	t.timer = nil
	t.handshakeOver()
	if c.state != connOpen {
		return
	}
	l.stats.tlsHandshakes.Add(1)
	t.tr.mu.Lock()
	pending := t.tr.raw
	t.tr.raw, t.tr.live = nil, true
	t.tr.mu.Unlock()
	t.live = true
	st := t.tc.ConnectionState()
	t.state = &st
	c.h = t.inner
	if len(t.pending) > 0 {
		// What a client wrote while it connected goes first.
		p := t.pending
		t.pending = nil
		if _, err := l.tlsWrite(c, t, p); err != nil {
			l.abort(c, err)
			return
		}
	}
	if x := c.aux; x.onConnect != nil {
		fn := x.onConnect
		x.onConnect = nil
		fn(nil)
	}
	l.callOpen(c)
	if c.state != connOpen {
		return
	}
	l.tlsInput(c, t, pending)
	if c.state == connOpen && t.fin {
		l.eofArrived(c)
	}
	l.clearHold(c, holdTLS)
}

// tlsInput takes a report of ciphertext for a TLS connection.
func (l *Loop) tlsInput(c *Conn, t *tlsLayer, in []byte) {
	if !t.live {
		if t.tr.feed(in) > maxHandshakeInput {
			l.setHold(c, holdTLS)
		}
		t.start(c)
		return
	}
	plain, err := l.tlsDecrypt(t, in)
	if len(plain) > 0 {
		l.deliver(c, plain, -1)
	}
	if err == nil || c.state != connOpen {
		return
	}
	if err == io.EOF {
		// close_notify: the plaintext stream ended, like a FIN.
		if !c.eof {
			c.eof = true
			l.syncReading(c)
			l.eofArrived(c)
		}
		return
	}
	l.stats.tlsErrors.Add(1)
	c.err = fmt.Errorf("%w: %w", ErrTLS, err)
	l.closeGracefully(c) // after the alert crypto/tls queued
}

// tlsDecrypt passes ciphertext to a live connection's tls.Conn and
// returns the plaintext it yields, in the loop's scratch buffer (valid
// until the next decrypt). The error is nil when the input is used up,
// io.EOF after the peer's close_notify, and crypto/tls's otherwise.
func (l *Loop) tlsDecrypt(t *tlsLayer, in []byte) ([]byte, error) {
	t.tr.cur = in
	buf := l.tlsPlain[:0]
	var err error
	for {
		if cap(buf)-len(buf) < tlsMinRead {
			nb := make([]byte, len(buf), max(2*cap(buf), tlsPlainSize))
			copy(nb, buf)
			buf = nb
		}
		n, e := t.tc.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if e != nil {
			if _, ok := e.(wouldBlock); !ok {
				err = e
			}
			break
		}
	}
	t.tr.cur = nil
	if cap(buf) <= tlsPlainKeep {
		l.tlsPlain = buf[:0]
	}
	return buf, err
}

// The loop's plaintext scratch: one read asks for at least tlsMinRead
// bytes (a record's worth, so a record is rarely split between reads); the
// buffer starts at tlsPlainSize and is kept up to tlsPlainKeep.
const (
	tlsMinRead   = 16 << 10
	tlsPlainSize = 64 << 10
	tlsPlainKeep = 1 << 20
)

// tlsWrite encrypts p into c's output. Before the hand-over (a dial's
// writes while it connects) p waits in the layer.
func (l *Loop) tlsWrite(c *Conn, t *tlsLayer, p []byte) (int, error) {
	if !t.live {
		t.pending = append(t.pending, p...)
		return len(p), nil
	}
	n, err := t.tc.Write(p)
	if err != nil {
		return n, fmt.Errorf("%w: %w", ErrTLS, err)
	}
	return n, nil
}

// writeRaw queues bytes that are already on the wire's form (ciphertext)
// on c's output. A closing connection still takes them: they are the
// alerts and close_notify that end it.
func (l *Loop) writeRaw(c *Conn, p []byte) {
	if c.state >= connTearingDown || c.wrShutDone {
		return
	}
	c.out.write(l, p)
	l.wrote(c)
}

// tlsCloseNotify sends close_notify on a live connection before it shuts
// its write side or closes.
func (c *Conn) tlsCloseNotify() {
	if t := c.tlsLayer(); t != nil && t.live {
		_ = t.tc.CloseWrite()
	}
}

// tlsLayer returns c's TLS layer, or nil for a plaintext connection.
func (c *Conn) tlsLayer() *tlsLayer {
	if c.aux == nil {
		return nil
	}
	return c.aux.tls
}

// TLS returns the state of a TLS connection's session (version, cipher
// suite, negotiated ALPN protocol, server name, peer certificates), or nil
// for a plaintext connection. It is set from OnOpen on (a TLS server's
// handler sees a connection only once its handshake is done) and never
// changes, so it may be kept, and read from any goroutine.
func (c *Conn) TLS() *tls.ConnectionState {
	if t := c.tlsLayer(); t != nil {
		return t.state
	}
	return nil
}

// tlsAvail is AvailableBuffer for a TLS connection: the loop's plaintext
// output scratch, empty.
func (l *Loop) tlsAvail() []byte {
	if l.tlsOut == nil {
		l.tlsOut = make([]byte, 0, tlsMinRead)
	}
	return l.tlsOut[:0]
}

// tlsGather joins bufs (n bytes in all) in the loop's gather scratch, so
// that Writev makes one record of them.
func (l *Loop) tlsGather(bufs [][]byte, n int) []byte {
	b := l.tlsJoin[:0]
	if cap(b) < n {
		b = make([]byte, 0, max(n, tlsMinRead))
	}
	for _, p := range bufs {
		b = append(b, p...)
	}
	if cap(b) <= tlsPlainKeep {
		l.tlsJoin = b[:0]
	}
	return b
}

// DialTLS is Dial for a TLS connection: once the TCP connect completes,
// the client handshake runs off the loop (within the TLS handshake
// timeout, DefaultTLSHandshakeTimeout), and h.OnOpen runs only when it is
// done; a handshake that fails closes the connection with an error
// wrapping ErrTLS (h.OnClose, no OnOpen). Writes made before then are
// encrypted and sent after the handshake. cfg is used as tls.Client uses
// it; when its ServerName is empty, the host of address is used, as
// crypto/tls.Dial does. Call it on the loop.
func (l *Loop) DialTLS(network, address string, cfg *tls.Config, h Handler, timeout time.Duration) (*Conn, error) {
	if cfg == nil {
		return nil, errors.New("veloq: DialTLS needs a tls.Config")
	}
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return nil, fmt.Errorf("veloq: DialTLS: %w", err)
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	ts := &tlsServer{timeout: DefaultTLSHandshakeTimeout} // the acceptor reads only its timeout
	c, err := l.Dial(network, address, &tlsAcceptor{ts: ts, inner: h}, timeout)
	if err != nil {
		return nil, err
	}
	t := newTLSLayer(c, h, nil)
	t.client = true
	t.tc = tls.Client(&t.tr, cfg)
	return c, nil
}
