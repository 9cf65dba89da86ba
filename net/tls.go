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
//	handshaking ──handshake done, handed over──▶ live
//	     │
//	     └── handshake failed, timed out, or connection closed ──▶ closed
//	         (the user's handler never saw the connection)
//
//   - handshaking: crypto/tls cannot resume a handshake after a would-block
//     error (its handshake error is sticky), so the handshake needs a
//     transport whose Read waits for the peer. It runs in one of two ways
//     (tls_handshake.go): on the loop, as a coroutine that gives the loop
//     back whenever it waits and is resumed when the peer's next flight
//     arrives (the default), or on a goroutine of its own, when the
//     tls.Config has callbacks that might block. Either way crypto/tls
//     makes any write error permanent, so every byte it writes is
//     accepted and queued; the loop keeps the connection's timer
//     (handshake timeout) and stops reading past maxHandshakeInput. The
//     user's handler gets nothing yet; the peer's FIN is kept for after
//     the hand-over.
//   - live: the hand-over ran on the loop and dropped the handshake's
//     state (tlsHandshake); from then on only the loop touches the
//     tls.Conn, and the connection holds no goroutine. The transport's
//     Read returns the ciphertext of the current input report, then a
//     temporary net.Error (crypto/tls does not keep temporary errors, so
//     records may be split anywhere), and Write queues on the output
//     directly. The hand-over first decrypts what the handshake already
//     pulled in (the client's first request can arrive with its
//     Finished), after OnOpen.
//
// Counters: Stats.TLSHandshakes, TLSHandshakeErrors, TLSHandshakeTimeouts
// and TLSRefused.

import (
	"context"
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

// tlsRecvBufferSize is the io_uring receive buffer size of a WithTLS
// server's loops, unless Config.RecvBufferSize sets one. A record carries
// up to 16 KiB of plaintext, which with its header, content type and
// AES-GCM tag is 16,406 bytes on the wire in TLS 1.3 (at most 16,645, RFC
// 8446 §5.2; TLS 1.2 with AES-GCM 16,413), so with the plaintext
// default of 16 KiB every full record took two receives. Worse, the
// first of them filled its buffer, which marks a bulk sender
// (uringBackend.received): such a connection stops receiving multishot
// and pays a submission per receive, two per record. 17 KiB holds any
// record a TLS stack sends plus the start of the next. Measured with
// bench/abab.py (TLS echo of 16 KiB messages paced at 20,000 a second
// over 64 connections, one loop on CPU 0, tcpload on CPU 1, 5 rounds of
// 6 s, two runs): 46.1 and 47.2 µs of server CPU per message with 16 KiB
// buffers, 43.0 and 44.3 µs with 17 KiB.
const tlsRecvBufferSize = 17 << 10

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
	where   handshakePlace // as asked (WithTLSHandshakeOffLoop)
	onLoop  bool           // where handshakes run, resolved at the start
	// cpu holds a token for each handshake goroutine that may compute at
	// once (off-loop handshakes only): GOMAXPROCS minus the loops, at
	// least one. A handshake gives its token back whenever it waits for
	// the peer. A loop that returns from the kernel needs a P to run on;
	// with more handshakes computing than spare Ps it queues behind them
	// in Go's run queues, and a flood of handshakes stalls every
	// established connection of the loop. Measured (one loop on CPU 0,
	// 1,000 clients handshaking in a loop on CPU 1, a keep-alive HTTPS
	// ping on CPU 1, 3 rounds): without the tokens the ping's median was
	// 0.17 ms in two rounds and 143 ms in the third (max 1.7 s),
	// net/http's 0.2, 236 and 300 ms; with them 0.17-0.26 ms in every
	// round, p99 5.7-11 ms. nil (a dial): no limit.
	cpu chan struct{}
}

// start resolves where a server's handshakes run and sizes the
// off-loop handshakes' share of the Ps for a server of loops loops.
func (ts *tlsServer) start(loops int) {
	ts.onLoop = ts.where.onLoop(ts.cfg)
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

// loopTLS is a loop's TLS state, shared by its connections.
type loopTLS struct {
	// Scratch: decrypted input, plaintext output, Writev's gathered
	// buffers.
	plain, out, join []byte
	// Handshakes that run on the loop (tls_handshake.go): the connections
	// with a step due, and whether runTLSSteps is deferred.
	steps    []*Conn
	stepping bool
	run      func()    // runTLSSteps, made once
	idle     []*hsCoro // idle handshake coroutines, for the next handshakes
}

// tlsLayer is one connection's TLS state. What only the handshake needs
// is in its transport's hs, dropped at the hand-over: an established
// connection keeps its tls.Conn, the transport's record cut and the ALPN
// protocol, and its ConnectionState only once something asks for it.
type tlsLayer struct {
	tc   *tls.Conn
	tr   tlsTransport
	alpn string // the protocol ALPN chose, set at the hand-over
	// ready is set at the hand-over; state is made from then on by the
	// first Conn.TLS (from any goroutine) and kept.
	ready atomic.Bool
	state atomic.Pointer[tls.ConnectionState]
}

// live reports whether the connection was handed over (loop only).
func (t *tlsLayer) live() bool { return t.tr.hs == nil }

// tlsHandshake is a connection's TLS state from its accept (or dial) to
// its hand-over.
type tlsHandshake struct {
	ts      *tlsServer // while it counts in ts.running; nil after
	inner   Handler    // the user's handler, the connection's from the hand-over on
	client  bool       // a DialTLS connection: its handshake starts at the connect
	pending []byte     // plaintext a client wrote before its hand-over
	started bool       // the handshake began (loop only)
	fin     bool       // the peer's FIN came during the handshake
	timer   *Timer     // handshake timeout

	// An on-loop handshake (tls_handshake.go), all the loop's.
	onLoop bool
	queued bool    // in the loop's tls.steps
	co     *hsCoro // the coroutine running it, from its first step until it ended
	err    error   // its error, once it ended (nil: handed over)

	// The transport's side of the handshake, shared with an off-loop
	// handshake's goroutine.
	mu   sync.Mutex
	cond sync.Cond
	raw  []byte // ciphertext the handshake has not read yet
	rerr error  // why reading ended (the FIN, a close), after raw

	wbuf []byte // what an off-loop handshake wrote since its last flush (its goroutine's)

	// yield gives the loop back from an on-loop handshake's Read until
	// more ciphertext or the end comes; false means it was abandoned.
	yield func(struct{}) bool

	// firstSeen: the first record was looked at, and cut in pieces if it
	// needed it (splitFirst).
	firstSeen bool

	cpu chan struct{} // the server's handshake CPU tokens (tlsServer.cpu)
}

// tlsTransport is the net.Conn under a connection's tls.Conn.
type tlsTransport struct {
	c  *Conn
	hs *tlsHandshake // until the hand-over (the loop sets it nil then)

	// live: the loop's alone
	cur []byte // ciphertext of the input report being decrypted

	// rec cuts what Read returns at record boundaries, from the first
	// byte on (the handshake's goroutine's until the hand-over, then the
	// loop's).
	rec recordCut
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
	switch {
	case t.hs == nil: // live
		if len(t.cur) == 0 {
			return 0, errWouldBlock
		}
		n := t.rec.take(p, t.cur)
		t.cur = t.cur[n:]
		return n, nil
	case t.hs.yield != nil:
		return t.readOnLoop(p)
	}
	return t.readOffLoop(p)
}

// The first record a handshake reads, a ClientHello (or a client's
// ServerHello), is a plaintext handshake record of about 1.5 KB when the
// client offers the post-quantum hybrid key share X25519MLKEM768, as
// browsers and Go's client now do. crypto/tls reads records into a buffer
// that keeps the largest size it ever needed for the life of the
// connection, 2 KB for such a record, though every later record of an
// idle or request/response connection is far smaller. So the transport
// hands that record over cut into records of at most tlsPiece bytes, one
// per Read (recordCut): TLS lets a handshake message span records (RFC 8446 §5.1, RFC 5246
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
func (h *tlsHandshake) mustWait() bool {
	switch {
	case h.rerr != nil:
		return false
	case len(h.raw) == 0:
		return true
	case h.firstSeen:
		return false
	case len(h.raw) < recordHeaderLen:
		return true
	}
	n, cut := toCut(h.raw)
	return cut && len(h.raw) < recordHeaderLen+n
}

// TLS record framing (RFC 8446 §5.1): a 5-byte header whose first byte is
// the content type and whose last two are the length of the body.
const (
	recordHeaderLen     = 5
	recordTypeHandshake = 22
)

// recordLen is the body length a record header gives.
func recordLen(h []byte) int { return int(h[3])<<8 | int(h[4]) }

// toCut reports whether the record whose header starts raw is one to cut
// in pieces (a plaintext handshake record over tlsPieceOver bytes, within
// TLS's limit), and its body length.
func toCut(raw []byte) (n int, cut bool) {
	n = recordLen(raw)
	return n, raw[0] == recordTypeHandshake && n > tlsPieceOver && n <= tlsMaxRecord
}

// splitFirst cuts the first record in raw into pieces (see tlsPiece) when
// it is a whole record to cut.
func (h *tlsHandshake) splitFirst() {
	h.firstSeen = true
	raw := h.raw
	if len(raw) < recordHeaderLen {
		return
	}
	n, cut := toCut(raw)
	if !cut || len(raw) < recordHeaderLen+n {
		return
	}
	pieces := (n + tlsPiece - 1) / tlsPiece
	out := make([]byte, 0, len(raw)+recordHeaderLen*(pieces-1))
	for body := raw[recordHeaderLen : recordHeaderLen+n]; len(body) > 0; {
		k := min(len(body), tlsPiece)
		out = append(out, raw[0], raw[1], raw[2], byte(k>>8), byte(k))
		out = append(out, body[:k]...)
		body = body[k:]
	}
	h.raw = append(out, raw[recordHeaderLen+n:]...)
}

func (t *tlsTransport) Write(p []byte) (int, error) {
	c, h := t.c, t.hs
	if h == nil || h.yield != nil {
		// The loop's own goroutine, or its handshake's coroutine.
		c.loop.writeRaw(c, p)
		return len(p), nil
	}
	// Kept until the handshake waits for the peer or ends (flush): a
	// server's flight and its session tickets, two writes, leave in one
	// post and one send.
	h.wbuf = append(h.wbuf, p...)
	return len(p), nil
}

// take moves buffered handshake ciphertext into p, never past the end of
// a record (recordCut): what crypto/tls holds at the hand-over is then
// nothing beyond the peer's Finished, and the rest is in raw.
func (t *tlsTransport) take(p []byte) int {
	h := t.hs
	if !h.firstSeen {
		h.splitFirst()
	}
	n := t.rec.take(p, h.raw)
	h.raw = h.raw[n:]
	if len(h.raw) == 0 {
		h.raw = nil
	}
	return n
}

func (t *tlsTransport) LocalAddr() net.Addr              { return t.c.laddr }
func (t *tlsTransport) RemoteAddr() net.Addr             { return t.c.RemoteAddr() }
func (t *tlsTransport) SetDeadline(time.Time) error      { return nil }
func (t *tlsTransport) SetReadDeadline(time.Time) error  { return nil }
func (t *tlsTransport) SetWriteDeadline(time.Time) error { return nil }

// tlsInput takes a report of ciphertext for a TLS connection.
func (l *Loop) tlsInput(c *Conn, t *tlsLayer, in []byte) {
	if h := t.tr.hs; h != nil {
		if h.feed(in) > maxHandshakeInput {
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
	buf := l.tls.plain[:0]
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
		if len(t.tr.cur) == 0 && t.tr.rec.atBoundary() {
			// crypto/tls holds nothing more (see recordCut): no
			// Read just to hear that the input is used up.
			break
		}
	}
	t.tr.cur = nil
	if cap(buf) <= tlsPlainKeep {
		l.tls.plain = buf[:0]
	}
	return buf, err
}

// recordCut follows the TLS record boundaries in the ciphertext stream of
// a live connection, so that its transport never hands crypto/tls more
// than the end of the record it is reading. tls.Conn.Read returns after one
// record whose plaintext fits the buffer it is given (tlsDecrypt gives at
// least tlsMinRead, a record's most), so once the input is used up at a
// boundary crypto/tls has nothing buffered and the Read that would only
// return the transport's would-block is skipped: one of the two Reads per
// input report of a request/response exchange.
type recordCut struct {
	hdr  [recordHeaderLen]byte // the header of the record being passed
	hdrN uint8                 // header bytes passed so far (5: passing the body)
	left uint16                // body bytes still to pass (a header's 16 bits)
}

// take copies from in into p, up to the end of the current record.
func (r *recordCut) take(p, in []byte) int {
	if int(r.hdrN) < len(r.hdr) {
		n := copy(p, in[:min(len(in), len(r.hdr)-int(r.hdrN))])
		copy(r.hdr[r.hdrN:], in[:n])
		r.hdrN += uint8(n)
		if int(r.hdrN) < len(r.hdr) {
			return n
		}
		r.left = uint16(recordLen(r.hdr[:]))
		if r.left == 0 {
			r.hdrN = 0
			return n
		}
		return n + r.take(p[n:], in[n:])
	}
	n := copy(p, in[:min(len(in), int(r.left))])
	r.left -= uint16(n)
	if r.left == 0 {
		r.hdrN = 0
	}
	return n
}

// atBoundary reports whether every record passed so far was passed whole.
func (r *recordCut) atBoundary() bool { return r.hdrN == 0 }

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
	if h := t.tr.hs; h != nil {
		h.pending = append(h.pending, p...)
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
	if t := c.tlsLayer(); t != nil && t.live() {
		_ = t.tc.CloseWrite()
	}
}

// tlsLayer returns c's TLS layer, or nil for a plaintext connection.
func (c *Conn) tlsLayer() *tlsLayer { return c.tls }

// TLS returns the state of a TLS connection's session (version, cipher
// suite, negotiated ALPN protocol, server name, peer certificates), or nil
// for a plaintext connection. It is set from OnOpen on (a TLS server's
// handler sees a connection only once its handshake is done) and never
// changes, so it may be kept, and read from any goroutine. The first call
// makes it (about 200 bytes, kept with the connection from then on).
func (c *Conn) TLS() *tls.ConnectionState {
	t := c.tlsLayer()
	if t == nil || !t.ready.Load() {
		return nil
	}
	if st := t.state.Load(); st != nil {
		return st
	}
	st := t.tc.ConnectionState()
	t.state.CompareAndSwap(nil, &st)
	return t.state.Load()
}

// NegotiatedProtocol returns the application protocol a TLS connection's
// peer and the server chose by ALPN ("h2", "http/1.1"), or "" when they
// chose none or the connection is plaintext. It is TLS().NegotiatedProtocol
// without making the whole state, for a protocol that picks its framing
// by it at OnOpen. Safe from any goroutine once OnOpen has run.
func (c *Conn) NegotiatedProtocol() string {
	if t := c.tlsLayer(); t != nil && t.ready.Load() {
		return t.alpn
	}
	return ""
}

// tlsAvail is AvailableBuffer for a TLS connection: the loop's plaintext
// output scratch, empty.
func (l *Loop) tlsAvail() []byte {
	if l.tls.out == nil {
		l.tls.out = make([]byte, 0, tlsMinRead)
	}
	return l.tls.out[:0]
}

// tlsGather joins bufs (n bytes in all) in the loop's gather scratch, so
// that Writev makes one record of them.
func (l *Loop) tlsGather(bufs [][]byte, n int) []byte {
	b := l.tls.join[:0]
	if cap(b) < n {
		b = make([]byte, 0, max(n, tlsMinRead))
	}
	for _, p := range bufs {
		b = append(b, p...)
	}
	if cap(b) <= tlsPlainKeep {
		l.tls.join = b[:0]
	}
	return b
}

// DialTLS is Dial for a TLS connection: once the TCP connect completes,
// the client handshake runs within the TLS handshake timeout
// (DefaultTLSHandshakeTimeout), on the loop, or on a goroutine when cfg
// has a callback that might block (the rule WithTLSHandshakeOffLoop
// describes for servers), and h.OnOpen runs only when it is done; a handshake that fails closes the connection with an error
// wrapping ErrTLS (h.OnClose, no OnOpen). Writes made before then are
// encrypted and sent after the handshake. cfg is used as tls.Client uses
// it; when its ServerName is empty, the host of address is used, as
// crypto/tls.Dial does. As with Dial, ctx's deadline bounds the TCP
// connect; called on the loop it returns at once, and from another
// goroutine it waits until the handshake is done or failed, or ctx ends.
func (l *Loop) DialTLS(ctx context.Context, network, address string, cfg *tls.Config, h Handler) (*Conn, error) {
	timeout, err := dialTimeout(ctx)
	if err != nil {
		return nil, err
	}
	if l.InLoop() {
		return l.dialTLS(network, address, cfg, h, timeout)
	}
	return l.dialWait(ctx, func() (*Conn, error) { return l.dialTLS(network, address, cfg, h, timeout) })
}

// dialTLS starts a TLS connection on the loop (see dial).
func (l *Loop) dialTLS(network, address string, cfg *tls.Config, h Handler, timeout time.Duration) (*Conn, error) {
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
	c, err := l.dial(network, address, &tlsAcceptor{ts: ts, inner: h}, timeout)
	if err != nil {
		return nil, err
	}
	t := newTLSLayer(c, h, nil, placeAuto.onLoop(cfg))
	t.tr.hs.client = true
	t.tc = tls.Client(&t.tr, cfg)
	return c, nil
}
