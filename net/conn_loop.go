package net

// The loop's side of a connection: its place in the table, what the
// loop does with each report of the backend (events.go routes them here),
// read control, backpressure, and the close protocol.

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/veloq/veloq/internal/sock"
)

// growTable appends v to a table indexed by slot, doubling its capacity
// when full. append grows a large slice by about a quarter each time, and
// for a table that only grows the arrays it leaves behind add up to several
// times the final one: garbage that, while connections pour in, inflates
// the heap the collector lets grow.
func growTable[T any](s []T, v T) []T {
	if len(s) == cap(s) {
		ns := make([]T, len(s), max(2*cap(s), 16))
		copy(ns, s)
		s = ns
	}
	return append(s, v)
}

// newConn puts fd into the connection table.
func (l *Loop) newConn(fd int, network string, h Handler) *Conn {
	c := &Conn{loop: l, fd: fd, h: h, unixSocket: network == "unix", lastActive: l.now}
	if n := len(l.free); n > 0 {
		c.slot = l.free[n-1]
		l.free = l.free[:n-1]
		*l.conns.at(c.slot) = c
	} else {
		c.slot = l.conns.add(c)
	}
	l.nconn.Add(1)
	return c
}

// captureAddrs records an accepted connection's addresses while the
// kernel still has them: the peer's is gone (ENOTCONN) once a reset
// arrives, and OnClose, which runs after the fd is closed, must still
// report both. The local address is the listener's unless that is a
// wildcard, and the peer's comes from the accept where the backend had it
// (epoll's accept4), so most servers pay at most one getpeername per
// connection. The fields never change afterwards, so the getters are safe
// from any goroutine.
func (l *Loop) captureAddrs(c *Conn, peer sock.Peer, listenAddr net.Addr) {
	switch {
	case peer.IP.IsValid():
		c.setPeerIP(peer.IP)
	case peer.Addr != nil:
		c.setPeer(peer.Addr)
	default:
		a, _ := sock.PeerAddr(c.fd)
		c.setPeer(a)
	}
	if a, ok := listenAddr.(*net.TCPAddr); ok && !a.IP.IsUnspecified() {
		c.laddr = listenAddr
	} else if c.unixSocket {
		c.laddr = listenAddr
	} else {
		c.laddr, _ = sock.LocalAddr(c.fd)
	}
}

func (l *Loop) configure(c *Conn) {
	if c.unixSocket {
		return
	}
	if !l.cfg.Nagle || sock.NoDelayByDefault {
		_ = sock.SetNoDelay(c.fd, !l.cfg.Nagle)
	}
	if l.cfg.KeepAlive > 0 {
		_ = sock.SetKeepAlive(c.fd, int(l.cfg.KeepAlive/time.Second))
	}
}

// register adopts an accepted fd: table slot, socket options, reading,
// idle timer, OnOpen. counted says the connection was already added to
// NumConns at handoff.
func (l *Loop) register(fd int, peer sock.Peer, ln *listener, counted bool) {
	if counted {
		l.nconn.Add(-1) // newConn counts it again
	}
	if l.stopping {
		closeFD(fd)
		return
	}
	c := l.newConn(fd, ln.network, ln.h)
	l.stats.accepted.Add(1)
	l.captureAddrs(c, peer, ln.addr)
	l.configure(c)
	if err := l.be.open(c.slot, fd, &c.out, nil); err != nil {
		l.log.Warn("veloq: registering connection", "err", err)
		closeFD(fd)
		l.forget(c)
		return
	}
	l.open(c)
}

// open starts a connection: the idle timer, OnOpen, then reading.
//
// Reading starts after OnOpen, so that a handler that pauses the
// connection in OnOpen (a proxy, while its backend connects) never has it
// reading: a pause of a reading connection tells the backend it is paced
// (syncReading), which on io_uring keeps it on one-shot receives for good,
// a submission per message. A pause before any input holds nothing back.
// tcp-proxy, 64 connections of 64-byte messages: 0.96 io_uring
// submissions per request fewer (3.06 to 2.1; every client connection was
// paced by its connect-time pause).
func (l *Loop) open(c *Conn) {
	if l.cfg.IdleTimeout > 0 {
		c.idle = l.AfterFunc(l.cfg.IdleTimeout, func() { l.checkIdle(c) })
	}
	l.callOpen(c)
	l.syncReading(c)
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

// Read control. Whether the backend reads and whether OnData runs follow
// from c.hold alone; these are the only places that change it.

// syncReading tells the backend to read or not, as the holds now say.
func (l *Loop) syncReading(c *Conn) {
	want := c.state == connOpen && !c.eof && !c.connecting && c.hold&stopsReading == 0
	if want != c.reading {
		if !want && c.hold&paces != 0 {
			l.be.pace(c.slot)
		}
		c.reading = want
		l.be.setReading(c.slot, want)
	}
}

func (l *Loop) setHold(c *Conn, h holds) {
	c.hold |= h
	l.syncReading(c)
}

// clearHold lifts h. If that lets delivery go on and input (or a FIN) is
// buffered, it is presented from a deferred task, and reading waits until
// then (holdReplay): restarting it now would let a receive pull in another
// batch on every pause/resume cycle while the handler consumes only what
// it has room for, growing the buffered input without bound.
func (l *Loop) clearHold(c *Conn, h holds) {
	c.hold &^= h
	if c.state == connOpen && c.hold&(stopsDelivery|holdReplay) == 0 && (len(c.in) > 0 || c.eofPending) {
		c.hold |= holdReplay
		l.Defer(func() { l.replay(c) })
	}
	l.syncReading(c)
}

// replay presents input buffered while delivery was held, then the FIN if
// one came, then lets reading restart.
func (l *Loop) replay(c *Conn) {
	if c.hold&holdReplay == 0 {
		return
	}
	c.hold &^= holdReplay
	if c.state != connOpen {
		return
	}
	if c.hold&stopsDelivery == 0 {
		l.present(c)
	}
	if c.eofPending && c.state == connOpen && c.hold&stopsDelivery == 0 {
		c.eofPending = false
		l.deliverEOF(c)
	}
	l.syncReading(c)
}

// onInput presents a chunk of input (in the backend's read memory) to the
// handler, then keeps whatever it left unconsumed.
func (l *Loop) onInput(c *Conn, chunk []byte, bid int32) (kept bool) {
	if c.state != connOpen {
		return false // closing: input is dropped
	}
	if c.spliceSrc() != nil {
		l.spliceInput(c, chunk) // read before the switch to splicing took effect
		return false
	}
	c.lastActive = l.now
	if t := c.tls; t != nil {
		l.tlsInput(c, t, chunk)
		return false
	}
	return l.deliver(c, chunk, bid)
}

// deliver presents input to the handler: chunk is the backend's read
// memory (bid >= 0 names its receive buffer) or, for TLS, the loop's
// plaintext scratch (bid -1); either way it is valid only during the call.
func (l *Loop) deliver(c *Conn, chunk []byte, bid int32) (kept bool) {
	if len(c.in) == 0 && c.hold&stopsDelivery == 0 {
		// The common case: the handler reads the backend's memory directly,
		// and ForwardTo may keep it (l.chunk).
		l.chunk.conn, l.chunk.bid, l.chunk.kept = c, bid, false
		c.view, c.viewOwned = chunk, false
		l.callData(c)
		l.chunk.conn = nil
		l.keepRest(c)
		return l.chunk.kept
	}
	if !l.keepInput(c, chunk) || c.hold&stopsDelivery != 0 {
		return false // held: keep the bytes, run no handler
	}
	l.present(c)
	return false
}

// presentWindow is how much buffered input one OnData sees at first.
const presentWindow = 64 << 10

// present runs OnData over the connection's buffered input, a window at a
// time: like a read, each call shows at most presentWindow bytes beyond
// what the handler left unconsumed (the window doubles while a handler
// consumes nothing, so a message of any size is eventually shown whole).
// Input buffered during a long pause can be megabytes on io_uring (the
// receives the kernel had completed before the pause took effect); shown
// at once, a handler that answers everything it sees would queue output
// far past the high-water mark. Shown by window, the write that crosses
// the mark stops the presentation, and the rest waits.
func (l *Loop) present(c *Conn) {
	off, window := 0, presentWindow
	for c.state == connOpen && c.hold&stopsDelivery == 0 && c.in != nil && off < len(c.in) {
		end := min(off+window, len(c.in))
		c.view, c.viewOwned = c.in[off:end], true
		l.callData(c)
		if c.in == nil { // closed, or spliced, inside the callback
			c.view = nil
			return
		}
		consumed := end - off - len(c.view)
		c.view = nil
		off += consumed
		if consumed > 0 {
			window = presentWindow
			continue
		}
		if end == len(c.in) {
			break // everything shown, nothing taken: wait for more input
		}
		window *= 2
	}
	if c.in == nil {
		return
	}
	if off >= len(c.in) || c.state != connOpen {
		l.dropInput(c)
		return
	}
	n := copy(c.in, c.in[off:]) // memmove the unconsumed rest to the front, once
	c.in = c.in[:n]
}

// keepInput appends p to the connection's own input buffer. Past
// ReadBufferCap it closes the connection with ErrInputTooLarge and
// reports false, unless the loop stopped reading (pastCap): what arrives
// then was already on its way, and it is the pause, not the handler's
// appetite, that holds it.
func (l *Loop) keepInput(c *Conn, p []byte) bool {
	if len(c.in)+len(p) > l.cfg.ReadBufferCap && c.hold&pastCap == 0 {
		l.abort(c, ErrInputTooLarge)
		return false
	}
	c.in = append(l.reserve(c.in, len(p)), p...)
	if len(c.in) > l.inPeak {
		l.inPeak = len(c.in)
		l.stats.inPeak.Store(int64(len(c.in)))
	}
	return true
}

// reserve returns b with room for n more bytes, moving it to a larger
// pooled buffer when needed (the old one goes back to the cache). Input is
// bounded by ReadBufferCap, so the copies are too.
func (l *Loop) reserve(b []byte, n int) []byte {
	if len(b)+n <= cap(b) {
		return b
	}
	if b == nil {
		return l.cache.Get(n)[:0]
	}
	nb := l.cache.Get(max(len(b)+n, 2*cap(b)))
	copy(nb, b)
	nb = nb[:len(b)]
	l.cache.Put(b)
	return nb
}

// keepRest moves input the handler left unconsumed out of the backend's
// read memory (the view of an input report).
func (l *Loop) keepRest(c *Conn) {
	rest := c.view
	c.view = nil
	if len(rest) == 0 || c.state != connOpen {
		l.dropInput(c)
		return
	}
	l.keepInput(c, rest) // in is empty here: the view was the backend's memory
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
	c.reading = false // the backend stops receiving by itself
	if s := c.spliceSrc(); s != nil {
		l.endSplice(s) // io_uring: the recv saw the FIN before splicing began
	}
	l.eofArrived(c)
}

// eofArrived delivers the end of the input (the peer's FIN, or a TLS
// close_notify) after the input before it.
func (l *Loop) eofArrived(c *Conn) {
	if c.state != connOpen {
		return
	}
	if c.hold&stopsDelivery != 0 || c.hold&holdReplay != 0 {
		c.eofPending = true // after the held input
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
	l.closeOnEOF(c)
}

// closeOnEOF is the automatic close for the peer's FIN: graceful, with
// io.EOF as the cause OnClose reports.
func (l *Loop) closeOnEOF(c *Conn) {
	if c.state != connOpen {
		return
	}
	c.err = io.EOF
	l.closeGracefully(c)
}

// wrote runs after every write: the connection joins the flush list, and
// output past the high-water mark stops reading at once, so input already
// received in this batch waits instead of producing more output.
func (l *Loop) wrote(c *Conn) {
	if !c.dirty {
		c.dirty = true
		l.dirty = append(l.dirty, c)
	}
	n := c.out.len()
	if n > l.outPeak {
		l.outPeak = n
		l.stats.outPeak.Store(int64(n))
	}
	if _, high := c.waterMarks(); n > high && high > 0 && c.hold&holdFlow == 0 {
		l.setHold(c, holdFlow)
	}
}

// onSent records that the kernel took n bytes of c's output.
func (l *Loop) onSent(c *Conn, n int) {
	c.out.ack(l, n)
	c.lastActive = l.now
	l.ctr.bytesOut += uint64(n)
	l.afterWrite(c)
}

// afterWrite runs after output made progress: drain callbacks,
// backpressure, a pending half-close, and a closing connection whose
// output has drained.
func (l *Loop) afterWrite(c *Conn) {
	if c.state >= connTearingDown {
		return
	}
	pending := c.out.len()
	if x := c.aux; x != nil && x.drainFn != nil && pending <= x.drainAt {
		l.runDrain(c)
	}
	if x := c.aux; x != nil && x.file != nil {
		l.fileDrained(x.file, pending)
	}
	if s := c.spliceDst(); s != nil && s.waitDrain && pending == 0 {
		s.waitDrain = false
		l.deferPump(s) // ordinary output is out: spliced bytes may follow
	}
	if c.hold&holdFlow != 0 && c.state == connOpen {
		if low, _ := c.waterMarks(); pending <= low {
			l.clearHold(c, holdFlow)
		}
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

// runDrain runs the OnDrain callback if its condition holds.
func (l *Loop) runDrain(c *Conn) {
	x := c.aux
	if x == nil || x.drainFn == nil || (c.state != connClosed && c.out.len() > x.drainAt) {
		return
	}
	fn := x.drainFn
	x.drainFn = nil
	l.safeCall(fn, "drain func")
}

func (l *Loop) shutdownWrite(c *Conn) {
	c.wrShutDone = true
	if err := shutdownWr(c.fd); err != nil && !errors.Is(err, syscall.ENOTCONN) {
		l.abort(c, os.NewSyscallError("shutdown", err))
		return
	}
	if c.eof {
		l.teardown(c)
	}
}

// closeGracefully is Close: reading stops and the output drains first.
func (l *Loop) closeGracefully(c *Conn) {
	c.state = connClosing
	if s := c.spliceSrc(); s != nil {
		l.endSplice(s) // reading stops: bytes still in the pipe are dropped
	}
	l.dropInput(c)
	if c.out.len() == 0 {
		// Nothing to send: the teardown stops reading along with the rest.
		// Stopping it first would cost io_uring a submission of its own
		// (setReading submits a pause's cancel at once), one system call
		// per connection when thousands time out together.
		l.teardown(c)
		return
	}
	l.syncReading(c)
	c.more().closeTimer = l.AfterFunc(l.cfg.CloseTimeout, func() {
		if c.state == connClosing {
			l.abort(c, ErrCloseTimeout)
		}
	})
}

// abort tears the connection down now; its pending output is dropped when
// the backend releases it (a send may still be in flight).
func (l *Loop) abort(c *Conn, err error) {
	if c.state >= connTearingDown {
		return
	}
	if c.err == nil || c.err == io.EOF {
		c.err = err
	}
	l.dropInput(c)
	l.teardown(c)
}

// teardown asks the backend to stop all I/O on c; it reports released
// once the kernel holds nothing of c's.
func (l *Loop) teardown(c *Conn) {
	if c.state >= connTearingDown {
		return
	}
	c.state = connTearingDown
	c.reading = false
	l.closes++
	if x := c.aux; x != nil && (x.spliceSrc != nil || x.spliceDst != nil) {
		l.spliceTeardown(c)
	}
	if c.SendingFile() {
		l.fileTeardown(c)
	}
	l.be.close(c.slot)
}

// finalize releases everything c owned and runs OnClose. The backend has
// closed the fd.
func (l *Loop) finalize(c *Conn) {
	if c.state == connClosed {
		return
	}
	c.state = connClosed
	c.idle.Stop()
	if c.aux != nil {
		c.aux.dialTimer.Stop()
		c.aux.closeTimer.Stop()
	}
	l.dropInput(c)
	c.out.reset(l)
	l.forget(c)
	l.stats.closed.Add(1)
	l.countDrain(c)
	if c.connecting {
		c.connecting = false
		if c.err == nil {
			c.err = ErrClosed
		}
	}
	if x := c.aux; x != nil && x.onConnect != nil {
		fn := x.onConnect
		x.onConnect = nil
		fn(c.err)
	}
	l.callClose(c)
	l.runDrain(c) // a closed connection releases whoever waits for drain
}

// forget frees c's slot.
func (l *Loop) forget(c *Conn) {
	c.state = connClosed
	*l.conns.at(c.slot) = nil
	l.free = append(l.free, c.slot)
	l.nconn.Add(-1)
}
