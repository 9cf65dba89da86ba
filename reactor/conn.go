package reactor

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"time"

	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/internal/sock"
)

// connState is a connection's lifecycle:
//
//	open ──Close()──▶ closing ──output drained or CloseTimeout──▶ closed
//	  │                                                             ▲
//	  └──────────── error, reset, abort, loop stop ─────────────────┘
//
// "closed" is entered by teardown; on io_uring the fd is closed and the
// handler's OnClose runs only once every operation the kernel still holds
// for the connection has completed (pendingOps == 0), so no buffer is
// released while the kernel may still touch it.
type connState uint8

const (
	connOpen connState = iota
	connClosing
	connTearingDown
	connClosed
)

// Conn is one connection on a loop. Its methods run on the loop goroutine
// (inside handler callbacks or posted closures) unless they say otherwise.
type Conn struct {
	loop    *Loop
	fd      int
	slot    uint32
	gen     uint32
	h       Handler
	network string
	state   connState
	err     error // close cause reported to OnClose

	// input
	view      []byte // unconsumed input shown to the handler
	viewOwned bool   // view aliases in (else the loop's read memory)
	in        []byte // owned buffer holding input left between callbacks

	// output: out collects writes; sending is what the backend is writing,
	// from sendOff. On io_uring, sending is frozen while a send is in flight.
	// held queues receive buffers given to ForwardTo, to be sent after
	// sending and before out (forward.go); sendHeld says sending is one of
	// them, provided buffer sendBid.
	out       []byte
	sending   []byte
	sendOff   int
	held      []heldBuf
	heldBytes int
	sendHeld  bool
	sendBid   uint16
	dirty     bool
	inFlight  bool // io_uring: a send is in flight

	paused     bool // reading stopped (backpressure, PauseRead or Close)
	holdRead   bool // PauseRead in force
	holdData   bool // HoldData or PauseRead: input is buffered, OnData waits
	resuming   bool // ResumeRead will present held input, then read again
	eofPending bool // the peer's FIN came during a hold; delivered on release
	eof        bool // peer sent FIN
	wrShut     bool // CloseWrite requested
	wrShutDone bool
	connecting bool
	opened     bool

	// io_uring bookkeeping
	recvArmed  bool
	recvCancel bool
	cancelAll  bool
	pendingOps int
	raw        any // keeps connect's sockaddr referenced until its CQE

	lastActive int64
	idle       *Timer
	closeTimer *Timer
	dialTimer  *Timer
	onConnect  func(error)
	drainFn    func() // OnDrain callback, run when pending output <= drainAt
	drainAt    int

	// splicing (splice.go): spliceSrc moves this connection's input to
	// another; spliceDst moves another's input to this one.
	spliceSrc, spliceDst *splice
	spliced              int64 // bytes moved out of this connection by splices
	splicePoll           bool  // io_uring: POLLIN for spliceSrc armed
	spliceOutPoll        bool  // io_uring: POLLOUT for spliceDst armed

	ctx          any
	laddr, raddr net.Addr
}

// Loop returns the loop that owns c. Safe from any goroutine.
func (c *Conn) Loop() *Loop { return c.loop }

// Fd returns the socket's file descriptor, for socket options. Do not read,
// write or close it.
func (c *Conn) Fd() int { return c.fd }

// Context returns the value stored with SetContext.
func (c *Conn) Context() any { return c.ctx }

// SetContext stores a per-connection value for the handler.
func (c *Conn) SetContext(v any) { c.ctx = v }

// SetHandler hands the connection to h: every event after the current
// callback (OnData, OnEOF, OnClose) goes to h instead of the handler it had.
// It does not call h.OnOpen; a protocol that takes a connection over (an
// HTTP server upgrading to WebSocket) calls what it needs itself.
func (c *Conn) SetHandler(h Handler) {
	if h == nil {
		panic("reactor: SetHandler(nil)")
	}
	c.h = h
}

// LocalAddr returns the local address (looked up on first use).
func (c *Conn) LocalAddr() net.Addr {
	if c.laddr == nil && c.state != connClosed {
		c.laddr, _ = sock.LocalAddr(c.fd)
	}
	return c.laddr
}

// RemoteAddr returns the peer's address (looked up on first use).
func (c *Conn) RemoteAddr() net.Addr {
	if c.raddr == nil && c.state != connClosed {
		c.raddr, _ = sock.PeerAddr(c.fd)
	}
	return c.raddr
}

// Buffered returns the number of unconsumed input bytes.
func (c *Conn) Buffered() int { return len(c.view) }

// Peek returns the next n bytes without consuming them; n <= 0 means all
// buffered bytes. With fewer than n buffered it returns them with
// io.ErrShortBuffer. The slice is valid until the callback returns.
func (c *Conn) Peek(n int) ([]byte, error) {
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
func (c *Conn) Write(p []byte) (int, error) {
	if c.state != connOpen || c.wrShut {
		return 0, ErrClosed
	}
	if len(p) == 0 {
		return 0, nil
	}
	c.appendOut(p)
	return len(p), nil
}

// Writev appends every buffer in bufs, like one Write of their concatenation.
func (c *Conn) Writev(bufs [][]byte) (int, error) {
	if c.state != connOpen || c.wrShut {
		return 0, ErrClosed
	}
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	if n == 0 {
		return 0, nil
	}
	c.reserveOut(n) // one grow for all of them
	for _, b := range bufs {
		c.out = append(c.out, b...)
	}
	c.loop.markDirty(c)
	return n, nil
}

// WriteString is Write for a string.
func (c *Conn) WriteString(s string) (int, error) {
	if c.state != connOpen || c.wrShut {
		return 0, ErrClosed
	}
	if len(s) == 0 {
		return 0, nil
	}
	c.reserveOut(len(s))
	c.out = append(c.out, s...)
	c.loop.markDirty(c)
	return len(s), nil
}

// OutputBuffered returns the bytes written but not yet sent.
func (c *Conn) OutputBuffered() int { return c.pendingOut() }

// AsyncWrite writes p from any goroutine: it posts the write to c's loop
// and calls done (if not nil) on the loop with the result. Writes posted by
// one goroutine reach the peer in the order posted. p is handed over: do
// not modify it until done runs.
func (c *Conn) AsyncWrite(p []byte, done func(error)) error {
	return c.loop.Post(func() {
		_, err := c.Write(p)
		if done != nil {
			done(err)
		}
	})
}

// Close closes the connection gracefully: reading stops, pending output is
// sent (for at most Config.CloseTimeout), then the socket is closed and
// OnClose runs with a nil error. It returns ErrClosed if already closing.
func (c *Conn) Close() error {
	if c.state != connOpen {
		return ErrClosed
	}
	l := c.loop
	c.state = connClosing
	if s := c.spliceSrc; s != nil {
		l.endSplice(s) // reading stops: bytes still in the pipe are dropped
	}
	l.dropInput(c)
	l.pauseRead(c)
	if c.pendingOut() == 0 {
		l.teardown(c)
		return nil
	}
	c.closeTimer = l.AfterFunc(l.cfg.CloseTimeout, func() {
		if c.state == connClosing {
			l.abort(c, ErrCloseTimeout)
		}
	})
	return nil
}

// CloseWrite half-closes the connection once pending output is sent
// (shutdown(SHUT_WR)): the peer sees EOF, and reading goes on.
func (c *Conn) CloseWrite() error {
	if c.state != connOpen || c.wrShut {
		return ErrClosed
	}
	c.wrShut = true
	if c.pendingOut() == 0 {
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
// noticed only when reading resumes or a write fails. Input already
// received when reading stops is kept for ResumeRead, beyond
// ReadBufferCap if need be: on epoll that is at most one read, on
// io_uring at most the loop's receive buffers (RecvBuffers ×
// RecvBufferSize) that the cancelled multishot recv had filled.
func (c *Conn) PauseRead() {
	c.resuming = false // cancels a ResumeRead still waiting to present input
	if c.state != connOpen || c.holdRead {
		return
	}
	c.holdRead, c.holdData = true, true
	c.loop.pauseRead(c)
}

// ResumeRead undoes PauseRead. Reading restarts unless backpressure (output
// above the high-water mark) still holds it; input that arrived before the
// pause took effect is presented at once.
func (c *Conn) ResumeRead() {
	if !c.holdRead {
		return
	}
	c.holdRead = false
	l := c.loop
	if s := c.spliceSrc; s != nil {
		c.holdData = false
		l.deferPump(s) // the splice reads, not the backend
		return
	}
	if len(c.in) > 0 {
		// Held input is presented first, and reading restarts after it
		// (redeliver) only if the handler did not pause again. Restarting
		// now would let an io_uring multishot recv pull in another batch
		// on every pause/resume cycle while the handler consumes only what
		// it has room for, growing the held input without bound. The pause
		// lasts until then, so input still arriving from before it joins
		// the held input under the same rules.
		c.holdRead = true
		if !c.resuming {
			c.resuming = true
			l.Defer(func() {
				if !c.resuming {
					return // paused again meanwhile
				}
				c.resuming = false
				c.holdRead, c.holdData = false, false
				l.redeliver(c)
			})
		}
		return
	}
	l.restartRead(c)
	c.ReleaseData()
}

// restartRead resumes kernel reading stopped by PauseRead, unless
// something else still holds it: a new PauseRead, a splice, or output
// above the high-water mark (afterWrite resumes that one).
func (l *Loop) restartRead(c *Conn) {
	if c.state == connOpen && c.paused && !c.holdRead && c.spliceSrc == nil && c.pendingOut() <= l.cfg.WriteHighWater {
		c.paused = false
		l.be.resumeRead(c)
	}
}

// HoldData stops OnData callbacks without stopping reading: input keeps
// arriving into the connection's buffer (up to Config.ReadBufferCap) and a
// reset or error still closes the connection. The peer's FIN is kept until
// ReleaseData, after the input before it. Offloading uses it to keep a
// connection's requests in order while one is off the loop.
func (c *Conn) HoldData() {
	if c.state == connOpen {
		c.holdData = true
	}
}

// ReleaseData undoes HoldData and presents the input that arrived meanwhile
// (and then the FIN, if one came) without waiting for more bytes.
func (c *Conn) ReleaseData() {
	if !c.holdData || c.holdRead {
		return
	}
	c.holdData = false
	if len(c.in) > 0 || c.eofPending {
		l := c.loop
		l.Defer(func() { l.redeliver(c) })
	}
}

// Abort closes the connection now: pending output is dropped and OnClose
// runs with err. Use it when waiting for a graceful Close would be wrong,
// such as a peer that stopped reading past a write deadline.
func (c *Conn) Abort(err error) {
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
	if prev := c.drainFn; prev != nil {
		c.drainFn = func() { prev(); fn() }
		c.drainAt = min(c.drainAt, limit)
	} else {
		c.drainFn, c.drainAt = fn, limit
	}
	if c.pendingOut() <= c.drainAt {
		l.Defer(func() { l.runDrain(c) })
	}
}

// runDrain runs the OnDrain callback if its condition holds.
func (l *Loop) runDrain(c *Conn) {
	if c.drainFn == nil || (c.state != connClosed && c.pendingOut() > c.drainAt) {
		return
	}
	fn := c.drainFn
	c.drainFn = nil
	l.safeCall(fn, "drain func")
}

// Closed reports whether the connection is closing or closed.
func (c *Conn) Closed() bool { return c.state != connOpen }

func (c *Conn) pendingOut() int { return len(c.out) + len(c.sending) - c.sendOff + c.heldBytes }

func (c *Conn) reserveOut(n int) {
	c.out = c.loop.reserve(c.out, n)
}

// reserve returns b with room for n more bytes, moving it to a larger
// pooled buffer when needed (the old one goes back to the cache). A nil b
// gets a fresh pooled buffer.
func (l *Loop) reserve(b []byte, n int) []byte {
	if len(b)+n <= cap(b) {
		return b
	}
	if b == nil {
		return l.cache.Get(n)[:0]
	}
	nb := l.cache.Get(len(b) + n)
	copy(nb, b)
	nb = nb[:len(b)]
	l.cache.Put(b)
	return nb
}

func (c *Conn) appendOut(p []byte) {
	c.reserveOut(len(p))
	c.out = append(c.out, p...)
	c.loop.markDirty(c)
}

func (l *Loop) markDirty(c *Conn) {
	if !c.dirty {
		c.dirty = true
		l.dirty = append(l.dirty, c)
	}
}

// newConn puts fd into the connection table.
func (l *Loop) newConn(fd int, network string, h Handler) *Conn {
	c := &Conn{loop: l, fd: fd, h: h, network: network, lastActive: l.now}
	if n := len(l.free); n > 0 {
		c.slot = l.free[n-1]
		l.free = l.free[:n-1]
		l.conns[c.slot] = c
	} else {
		c.slot = uint32(len(l.conns))
		l.conns = append(l.conns, c)
		l.gens = append(l.gens, 0)
	}
	c.gen = l.gens[c.slot]
	l.nconn.Add(1)
	return c
}

// lookup returns the connection for a completion's slot and generation,
// or nil when the slot has been reused since the operation was issued.
func (l *Loop) lookup(slot, gen uint32) *Conn {
	if int(slot) >= len(l.conns) {
		return nil
	}
	c := l.conns[slot]
	if c == nil || c.gen != gen {
		return nil
	}
	return c
}

func (l *Loop) configure(c *Conn) {
	if c.network == "unix" {
		return
	}
	if l.cfg.NoDelay {
		_ = sock.SetNoDelay(c.fd, true)
	}
	if l.cfg.KeepAlive > 0 {
		_ = sock.SetKeepAlive(c.fd, int(l.cfg.KeepAlive/time.Second))
	}
}

// register adopts an accepted fd: table slot, socket options, reading,
// idle timer, OnOpen.
// counted says the connection was already added to NumConns at handoff.
func (l *Loop) register(fd int, network string, h Handler, counted bool) {
	if counted {
		l.nconn.Add(-1) // newConn counts it again
	}
	if l.stopping {
		unix.Close(fd)
		return
	}
	c := l.newConn(fd, network, h)
	l.stats.accepted.Add(1)
	l.configure(c)
	if err := l.be.addConn(c); err != nil {
		l.log.Warn("veloq: registering connection", "err", err)
		c.err = err
		l.teardown(c)
		return
	}
	l.open(c)
}

func (l *Loop) open(c *Conn) {
	c.opened = true
	if l.cfg.IdleTimeout > 0 {
		c.idle = l.AfterFunc(l.cfg.IdleTimeout, func() { l.checkIdle(c) })
	}
	l.callOpen(c)
}

func (l *Loop) checkIdle(c *Conn) {
	if c.state == connClosed {
		return
	}
	elapsed := time.Duration(l.now - c.lastActive)
	if elapsed >= l.cfg.IdleTimeout {
		l.abort(c, ErrIdleTimeout)
		return
	}
	c.idle.Reset(l.cfg.IdleTimeout - elapsed)
}

// onData presents a chunk of input (in the loop's read memory) to the
// handler, then keeps whatever it left unconsumed.
func (l *Loop) onData(c *Conn, chunk []byte) {
	l.stats.bytesIn.Add(uint64(len(chunk)))
	if c.state != connOpen {
		return // closing: input is dropped
	}
	if c.spliceSrc != nil {
		l.spliceInput(c, chunk) // read before the switch to splicing took effect
		return
	}
	c.lastActive = l.now
	if len(c.in) == 0 && !c.holdData {
		// The common case: the handler reads the loop's memory directly.
		c.view, c.viewOwned = chunk, false
	} else {
		if !l.keepInput(c, chunk) {
			return
		}
		if c.holdData {
			return // HoldData or PauseRead: keep the bytes, run no handler
		}
		c.view, c.viewOwned = c.in, true
	}
	l.callData(c)
	l.keepRest(c)
}

// keepInput appends p to the connection's own input buffer. Past
// ReadBufferCap it closes the connection with ErrInputTooLarge and
// reports false, except under PauseRead: what arrives then was already
// on its way when reading stopped (bounded by the loop's receive buffers),
// and it is the handler's pause, not its appetite, that holds it.
func (l *Loop) keepInput(c *Conn, p []byte) bool {
	if len(c.in)+len(p) > l.cfg.ReadBufferCap && !c.holdRead {
		l.abort(c, ErrInputTooLarge)
		return false
	}
	c.in = append(l.reserve(c.in, len(p)), p...)
	return true
}

// keepRest moves unconsumed input out of the loop's read memory.
func (l *Loop) keepRest(c *Conn) {
	rest := c.view
	c.view = nil
	if len(rest) == 0 || c.state != connOpen {
		l.dropInput(c)
		return
	}
	if c.viewOwned {
		n := copy(c.in[:cap(c.in)], rest) // memmove: rest is a suffix of in
		c.in = c.in[:n]
		return
	}
	l.keepInput(c, rest) // in is nil here: the view was the loop's memory
}

// redeliver presents input buffered during a PauseRead to the handler.
// Then it restarts kernel reading that ResumeRead left stopped for it.
func (l *Loop) redeliver(c *Conn) {
	if c.state != connOpen {
		return
	}
	if !c.holdData && len(c.in) > 0 {
		c.view, c.viewOwned = c.in, true
		l.callData(c)
		l.keepRest(c)
	}
	if c.eofPending && c.state == connOpen && !c.holdData {
		c.eofPending = false
		l.deliverEOF(c)
	}
	l.restartRead(c)
}

func (l *Loop) dropInput(c *Conn) {
	c.view = nil
	if c.in != nil {
		l.cache.Put(c.in)
		c.in = nil
	}
}

// onEOF handles the peer's FIN.
func (l *Loop) onEOF(c *Conn) {
	if c.eof {
		return
	}
	c.eof = true
	if s := c.spliceSrc; s != nil {
		l.endSplice(s) // io_uring: the recv saw the FIN before splicing began
	}
	if c.state != connOpen {
		return
	}
	if c.holdData {
		c.eofPending = true
		return
	}
	l.deliverEOF(c)
}

func (l *Loop) deliverEOF(c *Conn) {
	if eh, ok := c.h.(EOFHandler); ok {
		l.callEOF(c, eh)
		if c.state == connOpen && c.wrShutDone {
			l.teardown(c) // both directions are done
		}
		return
	}
	c.err = io.EOF
	c.Close()
}

// afterWrite runs after output made progress: backpressure, pending
// half-close, and a closing connection whose output has drained.
func (l *Loop) afterWrite(c *Conn) {
	if c.state == connTearingDown || c.state == connClosed {
		return
	}
	pending := c.pendingOut()
	if c.drainFn != nil && pending <= c.drainAt {
		l.runDrain(c)
	}
	if s := c.spliceDst; s != nil && s.waitDrain && pending == 0 {
		s.waitDrain = false
		l.deferPump(s) // ordinary output is out: spliced bytes may follow
	}
	switch {
	case c.state == connOpen && !c.paused && pending > l.cfg.WriteHighWater:
		c.paused = true
		l.be.pauseRead(c)
	case c.state == connOpen && c.paused && !c.holdRead && c.spliceSrc == nil && pending <= l.cfg.WriteLowWater:
		c.paused = false
		l.be.resumeRead(c)
	}
	if pending != 0 {
		return
	}
	if c.wrShut && !c.wrShutDone && c.state == connOpen {
		l.shutdownWrite(c)
		return
	}
	if c.state == connClosing {
		l.teardown(c)
	}
}

func (l *Loop) shutdownWrite(c *Conn) {
	c.wrShutDone = true
	if err := unix.Shutdown(c.fd, unix.SHUT_WR); err != nil && !errors.Is(err, unix.ENOTCONN) {
		l.abort(c, os.NewSyscallError("shutdown", err))
		return
	}
	if c.eof {
		l.teardown(c)
	}
}

func (l *Loop) pauseRead(c *Conn) {
	if !c.paused {
		c.paused = true
		l.be.pauseRead(c)
	}
}

// abort tears the connection down now, dropping pending output.
func (l *Loop) abort(c *Conn, err error) {
	if c.state == connTearingDown || c.state == connClosed {
		return
	}
	if c.err == nil || c.err == io.EOF {
		c.err = err
	}
	l.dropInput(c)
	if c.out != nil { // unsent output goes; a send in flight ends with its CQE
		l.cache.Put(c.out)
		c.out = nil
	}
	l.dropHeld(c)
	l.teardown(c)
}

// teardown stops all I/O on c; the backend calls finalize once the kernel
// holds nothing of c's.
func (l *Loop) teardown(c *Conn) {
	if c.state == connTearingDown || c.state == connClosed {
		return
	}
	c.state = connTearingDown
	if c.spliceSrc != nil || c.spliceDst != nil {
		l.spliceTeardown(c)
	}
	l.be.closeConn(c)
}

// finalize releases everything c owned and runs OnClose. The backend has
// closed the fd.
func (l *Loop) finalize(c *Conn) {
	if c.state == connClosed {
		return
	}
	c.state = connClosed
	c.idle.Stop()
	c.closeTimer.Stop()
	c.dialTimer.Stop()
	l.dropInput(c)
	if c.out != nil {
		l.cache.Put(c.out)
		c.out = nil
	}
	l.dropHeld(c)
	l.releaseSending(c)
	c.raw = nil
	l.conns[c.slot] = nil
	l.gens[c.slot]++
	l.free = append(l.free, c.slot)
	l.nconn.Add(-1)
	l.stats.closed.Add(1)
	if c.connecting {
		c.connecting = false
		if c.err == nil {
			c.err = ErrClosed
		}
	}
	if c.onConnect != nil {
		fn := c.onConnect
		c.onConnect = nil
		fn(c.err)
	}
	l.callClose(c)
	l.runDrain(c) // a closed connection releases whoever waits for drain
}

// Handler calls, each shielded so that a panic closes only its connection.

func (l *Loop) callOpen(c *Conn) {
	defer l.recoverHandler(c, "OnOpen")
	c.h.OnOpen(c)
}

func (l *Loop) callData(c *Conn) {
	defer l.recoverHandler(c, "OnData")
	c.h.OnData(c)
}

func (l *Loop) callEOF(c *Conn, eh EOFHandler) {
	defer l.recoverHandler(c, "OnEOF")
	eh.OnEOF(c)
}

func (l *Loop) callClose(c *Conn) {
	defer l.recoverHandler(c, "OnClose")
	c.h.OnClose(c, c.err)
}

func (l *Loop) recoverHandler(c *Conn, where string) {
	r := recover()
	if r == nil {
		return
	}
	l.stats.panics.Add(1)
	l.log.Error("veloq: handler panicked; closing its connection",
		"callback", where, "panic", r, "stack", string(debug.Stack()))
	c.view = nil
	l.abort(c, fmt.Errorf("%w in %s: %v", ErrHandlerPanic, where, r))
}
