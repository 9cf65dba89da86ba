package reactor

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/bufpool"
	"github.com/veloq/veloq/internal/sock"
	"github.com/veloq/veloq/uring"
)

// uringBackend drives sockets with io_uring: one multishot accept per
// listener, one multishot recv per connection selecting buffers from the
// loop's provided-buffer ring, at most one send in flight per connection,
// and an eventfd read that a poster completes to wake the loop.
//
// A connection's operations are counted in Conn.pendingOps. Closing
// cancels them all (ASYNC_CANCEL_FD|ALL) and waits for their last CQE
// before closing the fd and releasing buffers, so the kernel never writes
// into memory the loop has given back.
type uringBackend struct {
	l     *Loop
	ring  *uring.Ring
	br    *uring.BufRing
	arena *bufpool.Arena
	cqes  []*uring.CQE

	wakeFd    int
	wakeBuf   []byte // heap: the pending eventfd read writes here
	one       []byte // 1 as a little-endian uint64, written by wake
	wakeArmed bool
	closing   bool
}

const bufGroup = 0

// The io_uring features veloq's backend relies on, checked by probe.
var requiredOps = []struct {
	op   uint8
	name string
}{
	{uring.OpAccept, "ACCEPT"}, {uring.OpRecv, "RECV"}, {uring.OpSend, "SEND"},
	{uring.OpRead, "READ"}, {uring.OpAsyncCancel, "ASYNC_CANCEL"}, {uring.OpConnect, "CONNECT"},
}

func probeUring() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := uring.Setup(8, uring.WithSingleIssuer(), uring.WithDeferTaskrun())
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("io_uring lacks SINGLE_ISSUER/DEFER_TASKRUN (needs Linux 6.1+): %w", err)
		}
		return err
	}
	defer r.Close()
	p, err := r.Probe()
	if err != nil {
		return fmt.Errorf("io_uring probe: %w", err)
	}
	for _, o := range requiredOps {
		if !p.Supported(o.op) {
			return fmt.Errorf("io_uring lacks opcode %s", o.name)
		}
	}
	br, err := r.SetupBufRing(8, bufGroup)
	if err != nil {
		return fmt.Errorf("io_uring provided buffer rings unsupported: %w", err)
	}
	return r.FreeBufRing(br)
}

func newUringBackend(l *Loop) (*uringBackend, error) {
	cfg := &l.cfg
	ring, err := uring.Setup(cfg.RingEntries, uring.WithCQSize(cfg.RingEntries*8),
		uring.WithSingleIssuer(), uring.WithDeferTaskrun(), uring.WithClamp())
	if err != nil {
		return nil, err
	}
	b := &uringBackend{l: l, ring: ring, cqes: make([]*uring.CQE, cfg.Budget), wakeFd: -1,
		wakeBuf: make([]byte, 8), one: []byte{1, 0, 0, 0, 0, 0, 0, 0}}
	fail := func(err error) (*uringBackend, error) {
		b.release()
		return nil, err
	}
	if b.arena, err = bufpool.NewArena(cfg.RecvBufferSize, cfg.RecvBuffers); err != nil {
		return fail(err)
	}
	if b.br, err = ring.SetupBufRing(uint32(cfg.RecvBuffers), bufGroup); err != nil {
		return fail(err)
	}
	for i := 0; i < cfg.RecvBuffers; i++ {
		b.br.Add(b.arena.Buf(i), uint16(i), i)
	}
	b.br.Advance(cfg.RecvBuffers)
	if b.wakeFd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return fail(os.NewSyscallError("eventfd", err))
	}
	if err := ring.RegisterRingFd(); err != nil {
		l.log.Debug("veloq: io_uring ring fd not registered", "err", err)
	}
	b.armWake()
	return b, nil
}

// sqe returns a free SQE, submitting to make room when the SQ is full.
func (b *uringBackend) sqe() *uring.SQE {
	for {
		if s := b.ring.GetSQE(); s != nil {
			return s
		}
		if _, err := b.ring.Submit(); err != nil {
			runtime.Gosched() // EBUSY/EAGAIN: the kernel is short; try again
		}
	}
}

func (b *uringBackend) wake() { _, _ = unix.Write(b.wakeFd, b.one) }

func (b *uringBackend) armWake() {
	s := b.sqe()
	s.PrepRead(b.wakeFd, b.wakeBuf, 0)
	s.SetUserData(token(opWake, 0, 0))
	b.wakeArmed = true
}

func (b *uringBackend) poll(timeout time.Duration) error {
	l := b.l
	var err error
	switch {
	case timeout < 0:
		_, err = b.ring.SubmitAndWait(1)
	case timeout == 0:
		// GETEVENTS without waiting: with DEFER_TASKRUN completions are
		// only posted when the loop enters the kernel.
		_, err = b.ring.SubmitAndWaitTimeout(0, 0)
	default:
		_, err = b.ring.SubmitAndWaitTimeout(1, timeout)
	}
	if err != nil && !errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
		return fmt.Errorf("io_uring_enter: %w", err)
	}
	n := b.ring.PeekBatchCQE(b.cqes)
	if n == 0 {
		return nil
	}
	l.now = l.clock() // the wait may have been long: handlers stamp activity with it
	l.stats.completions.Add(uint64(n))
	for i := 0; i < n; i++ {
		cqe := b.cqes[i]
		b.complete(cqe) // valid until CQAdvance below
	}
	b.ring.CQAdvance(uint32(n))
	if n == len(b.cqes) {
		l.more = true
	}
	return nil
}

func (b *uringBackend) complete(cqe *uring.CQE) {
	l := b.l
	op, slot, gen := untoken(cqe.UserData)
	switch op {
	case opWake:
		b.wakeArmed = false
		if !b.closing {
			b.armWake()
		}
	case opAccept:
		if int(slot) < len(l.listeners) {
			if ln := l.listeners[slot]; ln != nil && ln.gen&0xffffff == gen {
				b.accepted(ln, cqe)
				return
			}
		}
		if cqe.Res >= 0 {
			unix.Close(int(cqe.Res)) // accepted for a listener that is gone
		}
	case opRecv:
		b.received(slot, gen, cqe)
	case opSend:
		c := l.lookup(slot, gen)
		if c == nil {
			return
		}
		c.inFlight = false
		c.pendingOps--
		b.sent(c, cqe.Res)
	case opConnect:
		c := l.lookup(slot, gen)
		if c == nil {
			return
		}
		c.pendingOps--
		c.raw = nil
		if c.state == connTearingDown {
			b.maybeFinish(c)
			return
		}
		l.connected(c, cqe.Err())
	case opSplicePoll:
		c := l.lookup(slot, gen)
		if c == nil {
			return
		}
		if !cqe.More() {
			c.splicePoll = false
			c.pendingOps--
		}
		if c.state == connTearingDown {
			b.maybeFinish(c)
			return
		}
		if s := c.spliceSrc; s != nil {
			if !c.splicePoll {
				b.spliceArm(s) // the multishot poll ended (overflow, error)
			}
			l.pump(s)
		}
	case opSpliceOut:
		c := l.lookup(slot, gen)
		if c == nil {
			return
		}
		c.spliceOutPoll = false
		c.pendingOps--
		if c.state == connTearingDown {
			b.maybeFinish(c)
			return
		}
		if s := c.spliceDst; s != nil && s.waitOut {
			s.waitOut = false
			l.pump(s)
		}
	case opCancel:
		// Cancel results matter only through the cancelled ops' CQEs.
	}
}

func (b *uringBackend) received(slot, gen uint32, cqe *uring.CQE) {
	l := b.l
	res := cqe.Res
	bid, hasBuf := cqe.BufferID()
	more := cqe.More()
	c := l.lookup(slot, gen)
	if c == nil {
		if hasBuf {
			b.br.Recycle(b.arena.Buf(int(bid)), bid)
		}
		return
	}
	if !more {
		c.recvArmed = false
		c.recvCancel = false
		c.pendingOps--
	}
	switch {
	case res > 0:
		if hasBuf {
			// ForwardTo may keep the buffer for a send (l.chunk.kept);
			// that send's completion recycles it.
			l.chunk.conn, l.chunk.bid, l.chunk.kept = c, bid, false
			l.onData(c, b.arena.Buf(int(bid))[:res])
			l.chunk.conn = nil
			if !l.chunk.kept {
				b.br.Recycle(b.arena.Buf(int(bid)), bid)
			}
		}
	case res == 0:
		if hasBuf {
			b.br.Recycle(b.arena.Buf(int(bid)), bid)
		}
		if !more {
			l.onEOF(c)
		}
	case -res == int32(unix.ENOBUFS), -res == int32(unix.ECANCELED), -res == int32(unix.EINTR):
		// Out of provided buffers (they come back as handlers finish) or a
		// pause: re-armed below when reading should go on.
	default:
		l.abort(c, os.NewSyscallError("recv", cqe.Err()))
	}
	if c.state == connTearingDown {
		b.maybeFinish(c)
		return
	}
	if s := c.spliceSrc; s != nil && s.starting && !c.recvArmed && c.state == connOpen {
		l.beginSplice(s) // the recv is over: the splice takes the socket
	}
	if !c.recvArmed && c.state == connOpen && !c.paused && !c.eof {
		b.armRecv(c)
	}
}

func (b *uringBackend) sent(c *Conn, res int32) { // res: the send's CQE result
	l := b.l
	if c.state == connTearingDown {
		b.maybeFinish(c)
		return
	}
	if res < 0 {
		l.abort(c, os.NewSyscallError("send", syscall.Errno(-res)))
		return
	}
	c.sendOff += int(res)
	c.lastActive = l.now
	l.stats.bytesOut.Add(uint64(res))
	if c.sendOff >= len(c.sending) {
		l.releaseSending(c)
		l.nextSend(c)
	}
	if c.sending != nil {
		b.submitSend(c) // a partial send continues from sendOff
	}
	l.afterWrite(c)
}

func (b *uringBackend) accepted(ln *listener, cqe *uring.CQE) {
	l := b.l
	res := cqe.Res
	more := cqe.More()
	if !more {
		ln.armed = false
	}
	if res >= 0 {
		l.onAccept(ln, int(res))
	} else if -res != int32(unix.ECANCELED) && !ln.closing {
		if l.acceptFailed(ln, os.NewSyscallError("accept", cqe.Err()), func() {
			if !ln.armed {
				b.armAccept(ln)
			}
		}) {
			if ln.armed { // stop a still-armed multishot until the retry
				b.cancel(token(opAccept, ln.idx, ln.gen&0xffffff))
			}
			return
		}
	}
	if ln.closing {
		if !ln.armed {
			l.listenerClosed(ln)
		}
		return
	}
	if !ln.armed && !ln.retry.Pending() {
		b.armAccept(ln)
	}
}

func (b *uringBackend) armAccept(ln *listener) {
	s := b.sqe()
	s.PrepMultishotAccept(ln.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	s.SetUserData(token(opAccept, ln.idx, ln.gen&0xffffff))
	ln.armed = true
}

func (b *uringBackend) cancel(ud uint64) {
	s := b.sqe()
	s.PrepCancel(ud, 0)
	s.SetUserData(token(opCancel, 0, 0))
	s.SetFlags(uring.SQECQESkipSuccess)
}

func (b *uringBackend) addListener(ln *listener) error {
	ln.gen++
	b.armAccept(ln)
	return nil
}

func (b *uringBackend) closeListener(ln *listener) {
	if ln.armed {
		b.cancel(token(opAccept, ln.idx, ln.gen&0xffffff))
		return // the ECANCELED completion finishes the close
	}
	b.l.listenerClosed(ln)
}

func (b *uringBackend) armRecv(c *Conn) {
	s := b.sqe()
	s.PrepRecvMultishot(c.fd, nil, 0)
	s.SetFlags(uring.SQEBufferSelect)
	s.SetBufGroup(bufGroup)
	s.SetUserData(c.token(opRecv))
	c.recvArmed = true
	c.pendingOps++
}

func (b *uringBackend) addConn(c *Conn) error {
	b.armRecv(c)
	return nil
}

func (b *uringBackend) startRead(c *Conn) error {
	if !c.recvArmed {
		b.armRecv(c)
	}
	return nil
}

func (b *uringBackend) connect(c *Conn, a sock.Addr) error {
	raw, n, err := sock.Raw(a.SA)
	if err != nil {
		return err
	}
	c.raw = raw // the kernel reads it until the connect's CQE
	s := b.sqe()
	s.PrepConnect(c.fd, raw, n)
	s.SetUserData(c.token(opConnect))
	c.pendingOps++
	return nil
}

func (b *uringBackend) submitSend(c *Conn) {
	s := b.sqe()
	s.PrepSend(c.fd, c.sending[c.sendOff:], unix.MSG_NOSIGNAL)
	s.SetUserData(c.token(opSend))
	c.inFlight = true
	c.pendingOps++
}

func (b *uringBackend) flush(c *Conn) {
	if c.inFlight {
		return // the completion sends what was added meanwhile
	}
	if c.sending == nil && !b.l.nextSend(c) {
		return
	}
	b.submitSend(c)
}

func (b *uringBackend) pauseRead(c *Conn) {
	if c.recvArmed && !c.recvCancel {
		c.recvCancel = true
		b.cancel(c.token(opRecv))
	}
}

func (b *uringBackend) resumeRead(c *Conn) {
	if !c.recvArmed && !c.eof && c.state == connOpen {
		b.armRecv(c)
	}
	// With a cancel in flight, its ECANCELED completion re-arms.
}

func (b *uringBackend) readStopped(c *Conn) bool { return !c.recvArmed }

func (b *uringBackend) recycle(bid uint16) { b.br.Recycle(b.arena.Buf(int(bid)), bid) }

// spliceArm arms a multishot poll for input on the splice's source. It is
// edge-triggered (no IORING_POLL_ADD_LEVEL): the pump reads until EAGAIN,
// and every later arrival posts a new completion. IORING_OP_SPLICE is not
// used: the kernel runs it on an io-wq worker thread, and on a
// non-blocking socket it fails with EAGAIN instead of waiting for data.
func (b *uringBackend) spliceArm(s *splice) {
	c := s.src
	if c.splicePoll {
		return
	}
	sq := b.sqe()
	sq.PrepPollMultishot(c.fd, uint32(unix.POLLIN|unix.POLLRDHUP))
	sq.SetUserData(c.token(opSplicePoll))
	c.splicePoll = true
	c.pendingOps++
}

// spliceWaitOut arms a one-shot poll for writability on the destination.
func (b *uringBackend) spliceWaitOut(s *splice) {
	c := s.dst
	if c.spliceOutPoll {
		return
	}
	sq := b.sqe()
	sq.PrepPollAdd(c.fd, uint32(unix.POLLOUT))
	sq.SetUserData(c.token(opSpliceOut))
	c.spliceOutPoll = true
	c.pendingOps++
}

// spliceStop cancels the splice's polls; their last completions settle
// pendingOps (a connection being torn down also cancels them by fd).
func (b *uringBackend) spliceStop(s *splice) {
	if s.src.splicePoll {
		b.cancel(s.src.token(opSplicePoll))
	}
	if s.dst.spliceOutPoll {
		b.cancel(s.dst.token(opSpliceOut))
	}
}

func (b *uringBackend) closeConn(c *Conn) {
	if c.pendingOps > 0 {
		if !c.cancelAll {
			c.cancelAll = true
			s := b.sqe()
			s.PrepCancelFd(c.fd, uring.AsyncCancelAll)
			s.SetUserData(token(opCancel, 0, 0))
			s.SetFlags(uring.SQECQESkipSuccess)
		}
		return
	}
	b.maybeFinish(c)
}

func (b *uringBackend) maybeFinish(c *Conn) {
	if c.pendingOps > 0 {
		if !c.cancelAll {
			b.closeConn(c)
		}
		return
	}
	unix.Close(c.fd)
	b.l.finalize(c)
}

// close cancels the wake-up read and waits for its completion, so the
// kernel holds no operation when the ring and buffer memory go away.
func (b *uringBackend) close() error {
	b.closing = true
	if b.wakeArmed {
		b.cancel(token(opWake, 0, 0))
		deadline := time.Now().Add(time.Second)
		for b.wakeArmed && time.Now().Before(deadline) {
			if err := b.poll(10 * time.Millisecond); err != nil {
				break
			}
		}
	}
	return b.release()
}

func (b *uringBackend) release() error {
	var errs []error
	if b.br != nil {
		errs = append(errs, b.ring.FreeBufRing(b.br))
	}
	if b.ring != nil {
		errs = append(errs, b.ring.Close())
	}
	if b.arena != nil {
		errs = append(errs, b.arena.Close())
	}
	if b.wakeFd >= 0 {
		errs = append(errs, unix.Close(b.wakeFd))
	}
	return errors.Join(errs...)
}
