package net

// This file is the user's side of a connection: the Conn type and the
// methods handlers call. The loop's side (what happens when the backend
// reports input, progress, errors and release) is in conn_loop.go, and the
// handler callbacks, each shielded from panics, in conn_handler.go.

import (
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"time"
)

// connState is a connection's lifecycle:
//
//	open ──Close()──▶ closing ──output drained or CloseTimeout──▶ tearing down ──released──▶ closed
//	  │                                                                 ▲
//	  └──────────────────── error, reset, abort, loop stop ─────────────┘
//
// "tearing down" asks the backend to stop every operation; "closed" is
// entered when the backend reports the connection released (the kernel
// holds nothing of it and the fd is closed), and only then are its buffers
// given back and OnClose run.
type connState uint8

const (
	connOpen connState = iota
	connClosing
	connTearingDown
	connClosed
)

// holds says why a connection's input is held back. Each bit is set and
// cleared by one party; reading from the kernel and delivery to OnData are
// derived from the set (Loop.syncReading), instead of being flags of their
// own that every party must keep consistent.
type holds uint8

const (
	holdUser   holds = 1 << iota // PauseRead: no reading, no delivery
	holdFlow                     // output above WriteHighWater: likewise, until WriteLowWater
	holdData                     // HoldData: reading goes on, delivery waits
	holdSplice                   // a splice reads the socket instead
	holdReplay                   // held input is about to be presented: reading waits for it
	holdTLS                      // a TLS handshake has all the input it may buffer

	// stopsReading: the backend is asked not to receive.
	stopsReading = holdUser | holdFlow | holdSplice | holdReplay | holdTLS
	// stopsDelivery: input is buffered and OnData does not run.
	stopsDelivery = holdUser | holdFlow | holdData
	// paces: the handler holds its input back, so the backend is told to
	// receive no further ahead of it (backend.pace).
	paces = holdUser | holdFlow
	// pastCap: input may exceed ReadBufferCap, because the loop (not the
	// handler's appetite) stopped reading and what still arrives was on
	// its way.
	pastCap = holdUser | holdFlow | holdReplay
)

// Conn is one connection on a loop. Its methods run on the loop goroutine
// (inside handler callbacks or posted closures) unless they say otherwise.
type Conn struct {
	loop *Loop
	fd   int
	slot uint32

	// The one-byte fields sit together, leaving no padding: a Conn is
	// exactly a 256-byte allocation, which every idle connection pays
	// (Go's size classes go 256, 288: 32 bytes a field more).
	state      connState
	hold       holds
	viewOwned  bool // view is a window of in (else the backend's read memory)
	unixSocket bool
	reading    bool // the backend was last asked to read
	eof        bool // peer sent FIN
	eofPending bool // the FIN came while delivery was held; delivered after the input
	wrShut     bool // CloseWrite requested
	wrShutDone bool
	connecting bool
	dirty      bool       // on the loop's flush list
	drain      drainFlags // its part in a graceful Shutdown (shutdown.go)
	peer       peerAddr   // the peer's address (RemoteAddr)

	h   Handler
	err error // close cause reported to OnClose

	// input
	view []byte // unconsumed input shown to the handler
	in   []byte // owned buffer holding input left between callbacks

	out outQueue // pending output, read by the backend

	lastActive int64
	idle       *Timer
	aux        *connAux  // what few connections use; nil until one does
	tls        *tlsLayer // a TLS connection's layer (tls.go); nil in plaintext

	value any
	laddr net.Addr
	// raddr is the *net.TCPAddr RemoteAddr built from peer, made by the
	// first call (from any goroutine, hence atomic): a connection whose
	// peer nobody asks for (the proxy reads RemoteAddrPort) pays no
	// allocation for it.
	raddr atomic.Pointer[net.TCPAddr]
}

// connAux holds a connection's rarely used state, allocated by the first
// use: a dial in progress, an OnDrain waiter, splices, its own write water
// marks, a graceful close's timer, a peer address that is not a plain
// TCP one. The Conn keeps one pointer for all of it: 8 bytes where the
// fields cost the idle majority 64 (and a Conn size class).
type connAux struct {
	dialTimer  *Timer
	closeTimer *Timer
	onConnect  func(error)
	drainFn    func() // OnDrain callback, run when pending output <= drainAt
	drainAt    int
	spliced    int64     // bytes moved out of this connection by splices
	file       *fileSend // a SendFile in progress (sendfile.go)

	// splicing (splice.go): spliceSrc moves this connection's input to
	// another; spliceDst moves another's input to this one.
	spliceSrc, spliceDst *splice

	// SetWriteWaterMarks' marks, with ownMarks; without, the loop's.
	lowWater, highWater int
	ownMarks            bool

	// raddr is the peer's address when peer cannot hold it (a Unix
	// socket's, a zoned IPv6 one, the portable backend's). Set before
	// the connection is published and never changed, so RemoteAddr may
	// read it from any goroutine.
	raddr net.Addr
}

// more returns c's connAux, allocating it on first use.
func (c *Conn) more() *connAux {
	if c.aux == nil {
		c.aux = new(connAux)
	}
	return c.aux
}

// spliceSrc returns the splice that moves c's input elsewhere, if any.
func (c *Conn) spliceSrc() *splice {
	if x := c.aux; x != nil {
		return x.spliceSrc
	}
	return nil
}

// spliceDst returns the splice that moves input into c, if any.
func (c *Conn) spliceDst() *splice {
	if x := c.aux; x != nil {
		return x.spliceDst
	}
	return nil
}

// waterMarks returns c's write water marks: its own if SetWriteWaterMarks
// set them, else its loop's.
func (c *Conn) waterMarks() (low, high int) {
	if x := c.aux; x != nil && x.ownMarks {
		return x.lowWater, x.highWater
	}
	return c.loop.cfg.WriteLowWater, c.loop.cfg.WriteHighWater
}

// Loop returns the loop that owns c. Safe from any goroutine.
func (c *Conn) Loop() *Loop { return c.loop }

// Fd returns the socket's file descriptor, for socket options. Do not read,
// write or close it. On io_uring, closing c first shuts down the socket's
// reading (shutdown(2)), which a duplicate of the descriptor shares. On
// Windows it is not an operating-system handle but veloq's key for a
// socket that Go's net package owns.
func (c *Conn) Fd() int { return c.fd }

// Value returns the value stored with SetValue (nil if none).
func (c *Conn) Value() any { return c.value }

// SetValue stores a per-connection value for the handler.
func (c *Conn) SetValue(v any) { c.value = v }

// SetHandler hands the connection to h: every event after the current
// callback (OnData, OnEOF, OnClose) goes to h instead of the handler it had.
// It does not call h.OnOpen; a protocol that takes a connection over (an
// HTTP server upgrading to WebSocket) calls what it needs itself.
func (c *Conn) SetHandler(h Handler) {
	if h == nil {
		panic("veloq: SetHandler(nil)")
	}
	c.h = h
}

// LocalAddr returns the local address. It is recorded when the connection
// is established, so it answers in OnClose too, and from any goroutine. It
// is nil for an outbound connection that never connected.
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the peer's address. It is recorded when the
// connection is accepted (or dialed), so it answers in OnClose too, even
// after a reset, and from any goroutine. A TCP peer's address is kept
// compactly and made a *net.TCPAddr by the first call; RemoteAddrPort
// reads it without that allocation.
func (c *Conn) RemoteAddr() net.Addr {
	switch c.peer.kind {
	case peerNone:
		return nil
	case peerOther:
		return c.aux.raddr
	}
	if a := c.raddr.Load(); a != nil {
		return a
	}
	if a := c.peer.tcpAddr(); !c.raddr.CompareAndSwap(nil, a) {
		return c.raddr.Load() // another goroutine's, made at the same time
	}
	return c.raddr.Load()
}

// RemoteAddrPort returns a TCP peer's address and port without
// allocating, as RemoteAddr does; it is the zero AddrPort when the peer
// has no IP address (a Unix socket, a connection never connected).
func (c *Conn) RemoteAddrPort() netip.AddrPort {
	if c.peer.kind == peerOther {
		if a, ok := c.aux.raddr.(*net.TCPAddr); ok {
			return a.AddrPort()
		}
		return netip.AddrPort{}
	}
	return c.peer.addrPort()
}

// input returns the input the handler may consume now: none while
// HoldData holds it (the rest of the current chunk waits for ReleaseData,
// so a request after an offloaded one cannot be answered first).
func (c *Conn) input() []byte {
	if c.hold&holdData != 0 {
		return nil
	}
	return c.view
}

// Buffered returns the number of unconsumed input bytes (0 while HoldData
// holds the input).
func (c *Conn) Buffered() int { return len(c.input()) }

// Peek returns the next n bytes without consuming them; n <= 0 means all
// buffered bytes. With fewer than n buffered it returns them with
// io.ErrShortBuffer. The slice is valid until the callback returns.
func (c *Conn) Peek(n int) ([]byte, error) {
	if c.hold&holdData != 0 {
		return nil, io.ErrShortBuffer
	}
	if n <= 0 || n == len(c.view) {
		return c.view, nil
	}
	if n > len(c.view) {
		return c.view, io.ErrShortBuffer
	}
	return c.view[:n:n], nil
}

// Next returns the next n bytes and consumes them; n <= 0 means all. With
// fewer than n buffered it consumes nothing and returns io.ErrShortBuffer.
// The slice is valid until the callback returns.
func (c *Conn) Next(n int) ([]byte, error) {
	if c.hold&holdData != 0 {
		return nil, io.ErrShortBuffer
	}
	if n <= 0 {
		n = len(c.view)
	}
	if n > len(c.view) {
		return nil, io.ErrShortBuffer
	}
	b := c.view[:n:n]
	c.view = c.view[n:]
	return b, nil
}

// Discard consumes up to n bytes and returns how many it consumed.
func (c *Conn) Discard(n int) int {
	if c.hold&holdData != 0 {
		return 0
	}
	if n > len(c.view) || n < 0 {
		n = len(c.view)
	}
	c.view = c.view[n:]
	return n
}

// Read copies buffered input into p and consumes it, like io.Reader over
// what has arrived so far: with nothing buffered it returns 0 and io.EOF
// after the peer's FIN, otherwise 0 and nil.
func (c *Conn) Read(p []byte) (int, error) {
	if c.hold&holdData != 0 {
		return 0, nil
	}
	if len(c.view) == 0 {
		if c.eof {
			return 0, io.EOF
		}
		return 0, nil
	}
	n := copy(p, c.view)
	c.view = c.view[n:]
	return n, nil
}

// Write appends p to the connection's output. It never blocks: the loop
// sends the output at the end of the iteration, batched with every other
// write made in it. p may be reused when Write returns.
//
// Output above Config.WriteHighWater stops reading from the peer at once
// (no more OnData) until the output drains below WriteLowWater, so a peer
// that sends without reading cannot make the connection's memory grow.
//
// That bound holds only when c's output answers c's own input. A relay,
// which writes to c what another connection src received, is not bounded
// by it: pausing c's reading does not stop src, and pausing the wrong side
// can deadlock the pair. A relay turns the marks off on both sides
// (SetWriteWaterMarks(0, 0)) and paces itself: it writes no more than a
// limit minus c.OutputBuffered(), leaves the rest in src, and pauses src
// (PauseRead) until c.OnDrain(limit/2, ...) resumes it. Without that, a
// relay's buffered output has no bound. See ForwardTo and its example.
//
// Write must be called on c's loop (in a callback, or a closure posted to
// the loop); from another goroutine it writes nothing and returns
// ErrNotOnLoop. Use AsyncWrite there.
func (c *Conn) Write(p []byte) (int, error) {
	if c.offLoop() {
		return 0, ErrNotOnLoop
	}
	return c.write(p)
}

// AvailableBuffer returns an empty buffer whose capacity is free space in
// the connection's output queue itself (at least 512 bytes), like
// bufio.Writer's: append a message to it and pass the result to Write at
// once, and Write queues those bytes where they are instead of copying
// them. Any other use stays correct but gains nothing: a result that
// outgrew the capacity, or that was not the next thing written, is copied
// like any other slice (and what another Write put there first may have
// overwritten it, so do not write in between).
//
// It returns nil off the loop or once the connection is closed. Call it on
// c's loop.
func (c *Conn) AvailableBuffer() []byte {
	if c.offLoop() || c.state != connOpen || c.wrShut || c.SendingFile() {
		return nil
	}
	if c.tlsLayer() != nil {
		// Plaintext is encrypted on its way to the queue: the loop's
		// scratch serves instead, and Write encrypts straight from it.
		return c.loop.tlsAvail()
	}
	return c.out.avail(c.loop)
}

// writable is the gate of every write path: nil when c may take output
// now, ErrClosed once it is closing or its write side is shut, and
// ErrSendingFile while SendFile owns the output.
func (c *Conn) writable() error {
	switch {
	case c.state != connOpen || c.wrShut:
		return ErrClosed
	case c.SendingFile():
		return ErrSendingFile
	}
	return nil
}

func (c *Conn) write(p []byte) (int, error) {
	if err := c.writable(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if t := c.tlsLayer(); t != nil {
		return c.loop.tlsWrite(c, t, p)
	}
	c.out.write(c.loop, p)
	c.loop.wrote(c)
	return len(p), nil
}

// Writev appends every buffer in bufs, like one Write of their concatenation.
func (c *Conn) Writev(bufs [][]byte) (int, error) {
	if c.offLoop() {
		return 0, ErrNotOnLoop
	}
	return c.writev(bufs)
}

func (c *Conn) writev(bufs [][]byte) (int, error) {
	if err := c.writable(); err != nil {
		return 0, err
	}
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	if t := c.tlsLayer(); t != nil {
		// One record for all of them, not one each.
		return c.loop.tlsWrite(c, t, c.loop.tlsGather(bufs, n))
	}
	c.out.reserve(c.loop, n) // a frame's header and payload in one segment
	for _, b := range bufs {
		c.out.write(c.loop, b)
	}
	if n > 0 {
		c.loop.wrote(c)
	}
	return n, nil
}

// WriteString is Write for a string.
func (c *Conn) WriteString(s string) (int, error) {
	if c.offLoop() {
		return 0, ErrNotOnLoop
	}
	if err := c.writable(); err != nil {
		return 0, err
	}
	if len(s) == 0 {
		return 0, nil
	}
	if t := c.tlsLayer(); t != nil {
		return c.loop.tlsWrite(c, t, append(c.loop.tlsAvail(), s...))
	}
	c.out.writeString(c.loop, s)
	c.loop.wrote(c)
	return len(s), nil
}

// SetWriteWaterMarks overrides Config.WriteLowWater and WriteHighWater for
// this connection. high <= 0 turns the automatic pause off: for a handler
// that bounds its output itself, such as a relay whose output is fed by
// another connection's input and which pauses that connection instead
// (stopping this one's reading could deadlock the pair).
func (c *Conn) SetWriteWaterMarks(low, high int) {
	c.mustOnLoop()
	if high <= 0 {
		low, high = 0, 0
	} else if low <= 0 || low > high {
		low = high / 2
	}
	x := c.more()
	x.lowWater, x.highWater, x.ownMarks = low, high, true
	if c.hold&holdFlow != 0 && (high == 0 || c.out.len() <= low) {
		c.loop.clearHold(c, holdFlow)
	}
}

// OutputBuffered returns the bytes written but not yet sent.
func (c *Conn) OutputBuffered() int { return c.out.len() }

// Backlogged reports whether c's pending output went above the high-water
// mark and has not yet drained to the low-water mark: the state in which
// the loop stops reading from the peer and OnData does not run. Writes
// still succeed; it says the peer is not keeping up.
//
// A handler that answers several messages already buffered in one OnData
// (pipelined requests, back-to-back frames) checks it between answers and,
// when it reports true, returns leaving the rest unconsumed: OnData runs
// again with that input once the output has drained. Answering everything
// regardless would queue output without bound for a peer that sends
// requests and reads nothing.
func (c *Conn) Backlogged() bool { return c.hold&holdFlow != 0 }

// AsyncWrite writes p from any goroutine: it posts the write to c's loop
// and calls done (if not nil) on the loop with the result. Writes posted by
// one goroutine reach the peer in the order posted. p is handed over: do
// not modify it until done runs.
func (c *Conn) AsyncWrite(p []byte, done func(error)) error {
	return c.loop.Post(func() {
		_, err := c.write(p)
		if done != nil {
			done(err)
		}
	})
}

// Close closes the connection gracefully: reading stops, pending output is
// sent (for at most Config.CloseTimeout), then the socket is closed and
// OnClose runs with a nil error. It returns ErrClosed if already closing,
// and ErrNotOnLoop (closing nothing) when called off c's loop: post a
// closure that calls it instead.
func (c *Conn) Close() error {
	if c.offLoop() {
		return ErrNotOnLoop
	}
	if c.state != connOpen {
		return ErrClosed
	}
	if c.SendingFile() {
		c.aux.file.closeAfter = true // after the file's last byte
		return nil
	}
	if !c.wrShut {
		c.tlsCloseNotify()
	}
	c.loop.untell(c)
	c.loop.closeGracefully(c)
	return nil
}

// CloseWrite half-closes the connection once pending output is sent
// (shutdown(SHUT_WR)): the peer sees EOF, and reading goes on.
func (c *Conn) CloseWrite() error {
	if c.offLoop() {
		return ErrNotOnLoop
	}
	if c.state != connOpen || c.wrShut {
		return ErrClosed
	}
	if c.SendingFile() {
		c.aux.file.shutAfter = true // after the file's last byte
		return nil
	}
	c.tlsCloseNotify()
	c.wrShut = true
	c.loop.untell(c)
	if c.out.len() == 0 {
		c.loop.shutdownWrite(c)
	}
	return nil
}

// AfterFunc runs fn on the loop after d, unless the connection has closed
// by then. Stop the returned timer to cancel it.
func (c *Conn) AfterFunc(d time.Duration, fn func()) *Timer {
	return c.loop.AfterFunc(d, func() {
		if c.state != connClosed {
			fn()
		}
	})
}

// PauseRead stops reading from the peer until ResumeRead: the kernel
// buffers, then TCP flow control slows the peer. No OnData runs meanwhile.
// It is the tool for backpressure between connections (a proxy's fast side
// waiting for its slow side). While paused, the peer's FIN or reset is
// noticed only when reading resumes or a write fails. Input the kernel had
// already delivered when reading stopped is kept for ResumeRead, beyond
// ReadBufferCap if need be: on epoll that is at most one read, on
// io_uring at most what the cancelled receive had completed.
func (c *Conn) PauseRead() {
	c.mustOnLoop()
	if c.state != connOpen || c.hold&holdUser != 0 {
		return
	}
	c.loop.setHold(c, holdUser)
}

// ResumeRead undoes PauseRead. Input that arrived before the pause took
// effect is presented first (from a deferred task, not inside this call),
// and reading restarts after it unless the handler paused again or output
// above the high-water mark still holds it.
func (c *Conn) ResumeRead() {
	c.mustOnLoop()
	if c.hold&holdUser == 0 {
		return
	}
	l := c.loop
	l.clearHold(c, holdUser)
	if s := c.spliceSrc(); s != nil {
		l.deferPump(s) // the splice reads, not the backend
	}
}

// HoldData stops OnData callbacks without stopping reading: input keeps
// arriving into the connection's buffer (up to Config.ReadBufferCap) and a
// reset or error still closes the connection. The peer's FIN is kept until
// ReleaseData, after the input before it. Offloading uses it to keep a
// connection's requests in order while one is off the loop.
//
// From the call on, the input not yet consumed is hidden too: inside the
// current OnData, Next, Peek and Read find nothing more and Buffered is 0,
// so a handler that goes on parsing after it handed a request off cannot
// answer the next request before that one. ReleaseData presents the rest.
func (c *Conn) HoldData() {
	c.mustOnLoop()
	if c.state == connOpen {
		c.hold |= holdData
	}
}

// ReleaseData undoes HoldData and presents the input that arrived meanwhile
// (and then the FIN, if one came) without waiting for more bytes.
func (c *Conn) ReleaseData() {
	c.mustOnLoop()
	if c.hold&holdData != 0 {
		c.loop.clearHold(c, holdData)
	}
}

// Redeliver presents the input the connection has buffered (and then a
// FIN kept with it) to the handler again, from a deferred task, without
// waiting for more bytes: for a handler that left input unconsumed while
// it was busy (a request answered off the loop) and is ready for it now,
// or a new handler after SetHandler. Nothing happens while delivery is
// held (PauseRead, HoldData, backpressure): lifting the hold presents it.
func (c *Conn) Redeliver() {
	c.mustOnLoop()
	c.loop.clearHold(c, 0)
}

// Abort closes the connection now: pending output is dropped and OnClose
// runs with err. Use it when waiting for a graceful Close would be wrong,
// such as a peer that stopped reading past a write deadline.
func (c *Conn) Abort(err error) {
	c.mustOnLoop()
	if err == nil {
		err = ErrClosed
	}
	c.loop.abort(c, err)
}

// OnDrain runs fn on the loop once the connection's pending output is at
// most limit bytes: at once (deferred) if it already is, otherwise when
// sends bring it there. If the connection closes first, fn runs then, so a
// waiter is never stranded; fn checks Closed. A second OnDrain before the
// first ran keeps both functions and the lower limit.
func (c *Conn) OnDrain(limit int, fn func()) {
	l := c.loop
	if c.state == connClosed {
		l.Defer(fn)
		return
	}
	x := c.more()
	if prev := x.drainFn; prev != nil {
		x.drainFn = func() { prev(); fn() }
		x.drainAt = min(x.drainAt, limit)
	} else {
		x.drainFn, x.drainAt = fn, limit
	}
	if c.out.len() <= x.drainAt {
		l.Defer(func() { l.runDrain(c) })
	}
}

// Closed reports whether the connection is closing or closed.
func (c *Conn) Closed() bool { return c.state != connOpen }

// offLoop reports whether the caller is not on c's loop (see Loop.onLoop).
func (c *Conn) offLoop() bool { return !c.loop.onLoop() }

// mustOnLoop panics with ErrNotOnLoop when a method without an error
// result is called off c's loop, in race builds (where the check is exact);
// other builds skip the check for these methods.
func (c *Conn) mustOnLoop() {
	if raceBuild && c.offLoop() {
		panic(ErrNotOnLoop)
	}
}
