//go:build linux

package net

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/internal/sock"
	"github.com/veloq/veloq/uring"
)

// uringBackend drives sockets with io_uring: one multishot poll per
// listener, on an epoll set holding it (see armAccept), then accept4; one
// recv per reading connection selecting buffers from the
// loop's provided-buffer ring (multishot, or one-shot for bulk senders), at most one send in flight per
// connection, and a uring.Waker whose eventfd read a poster completes.
//
// Each connection has a record here (uconn, indexed by slot) counting the
// operations the kernel holds for it. Closing ends each of them (see
// close) and waits for their last CQE before closing the fd (in the ring,
// see closeFD) and reporting the slot released, so the kernel never
// writes into memory the loop has given back.
type uringBackend struct {
	ev    sink
	log   *slog.Logger
	ring  *uring.Ring
	cqes  []*uring.CQE
	waker *uring.Waker
	// whole is the ring of whole buffers, one receive each; small, where
	// the kernel can consume buffers incrementally (nil elsewhere), the
	// ring of shared ones (see smallRecv).
	whole, small *recvRing
	smallMax     int32 // receives of this many bytes or more take whole buffers

	conns table[uconn]
	msgs  []*usendmsg // by slot: a gathered send's header, made on first use
	// dialing holds, by slot, the address a connect in flight reads
	// until its completion: few connections dial, and a field of uconn
	// would cost every slot 8 bytes.
	dialing map[uint32]*unix.RawSockaddrAny
	lns     []ulisten
	again   []uint32 // listeners whose accepting stopped at maxAccepts
	pkts    []upkt   // datagram sockets (udp_uring.go)
	prx     pktRing  // their receive buffers (made with the first)
	closing bool

	// Batched waiting (Config.BatchWait, see wait and batch): sends
	// submitted since the last poll, and the inputs and active
	// connections the batch is sized by.
	sends uint32
	act   activity

	// draining counts the connections being closed whose operations the
	// kernel still holds (see close and poll).
	draining int
	// closeq holds the connections whose operations are all back, to be
	// closed by poll (closeQueue); closed those whose close poll queued
	// in the ring, to report released once it is submitted.
	closeq closeQueue
	closed []uint32
}

// uconn is the backend's record of one connection slot.
//
// Every slot of the table pays its size: 40 bytes, with fd an int32 (a
// Linux descriptor is one) and a connect's address kept aside
// (uringBackend.dialing).
type uconn struct {
	fd         int32
	gen        uint32 // bumped by open; carried in every token
	ops        int32  // operations the kernel holds
	whole      bool   // its receives select whole buffers (see smallRecv)
	recvWhole  bool   // the armed recv does
	smalls     uint8  // small receives in a row while whole
	q          *outQueue
	sending    int32 // bytes of the send in flight (one segment); 0: none
	recv       bool  // a recv is armed
	recvCancel bool  // and its end asked for (a cancel, or endRecv)
	mode       recvMode
	shorts     uint8 // short receives in a row while recvOneshot
	reading    bool  // the loop wants input
	eof        bool
	connecting bool
	watchIn    bool // input watch wanted: POLLIN armed once recv has ended
	pollIn     bool // multishot POLLIN armed
	pollOut    bool // one-shot POLLOUT armed
	closing    bool
	epoch      uint8 // activity epoch of its last input (wraps; a heuristic)
}

// ulisten is the backend's record of one listener.
type ulisten struct {
	fd      int
	ep      int // the epoll set holding fd alone, which the ring polls
	gen     uint32
	armed   bool // multishot poll in flight
	backOff bool // the loop asked for a pause after an accept error
	closing bool
}

// The buffer groups of the connections' receives: whole buffers, and
// small shared ones (group 1 is pktBufGroup).
const (
	bufGroup      = 0
	smallBufGroup = 2
)

// smallRecv: where the kernel consumes provided buffers incrementally
// (IOU_PBUF_RING_INC, Linux 6.12+), connections of small messages receive
// into a second ring, of buffers of at most smallBufSize that their
// receives share: each takes only the bytes it got, and the next, of any
// connection, goes on after them. In the ring of whole buffers each
// receive takes one, and the kernel hands them out in turn, so a page of
// every buffer in the ring stays resident however little came in: after
// veloq-proxy's idle benchmark (2,000 clients, one GET each, connected
// 128 at a time) the ring had grown to 64 buffers, 256 KB of them
// resident (smaps). A shared buffer splits a receive where it ends,
// though, and relaying 64 KiB messages through shared buffers alone cost
// 8-20 % more CPU (commit b543f92), so a connection moves to whole
// buffers at its first receive of a sixteenth of a shared buffer or more
// (uringBackend.smallMax, 1 KiB), and back after shortsToMultishot
// receives in a row below that. Each shared buffer still splits the
// receive that reaches its end, a receive more per 16 KiB of small
// messages: 800-byte requests through veloq-proxy (wrk -c64, 64-byte
// bodies) took 2.10-2.14 receives a request, 2.02-2.08 with whole
// buffers only; 1.5 KB ones, moved to whole buffers, 2.11 as before
// (with an eighth, 2 KiB, they stayed and took 2.17). New connections
// start on the shared ring: a client that sends one request and then
// idles never takes a whole buffer.
const (
	smallBufSize = 16 << 10
	// smallRingStep is how many buffers the shared ring starts with and
	// gets each time it runs dry: all of them end up resident (the
	// kernel writes each to its end before moving on), and two take a
	// connect burst's 128 requests (about 10 KB) with room to spare.
	smallRingStep = 2
)

// recvMode is how a connection receives.
type recvMode uint8

const (
	recvMultishot recvMode = iota // one multishot recv while reading
	recvOneshot                   // one buffer at a time: a bulk sender (see received)
	recvPaced                     // one buffer at a time for good: its handler holds input back (see pace)
)

// shortsToMultishot is how many receives in a row must come back short of
// a full buffer before a connection goes back to a multishot recv.
const shortsToMultishot = 4

// The io_uring features veloq's backend relies on, checked by probe.
var requiredOps = []struct {
	op   uint8
	name string
}{
	{uring.OpRecv, "RECV"}, {uring.OpSend, "SEND"},
	{uring.OpRead, "READ"}, {uring.OpAsyncCancel, "ASYNC_CANCEL"}, {uring.OpConnect, "CONNECT"},
	{uring.OpPollAdd, "POLL_ADD"}, {uring.OpClose, "CLOSE"},
}

// probeUring checks, on a throwaway ring set up like the loops' rings,
// everything the backend needs: the setup flags, the opcodes, provided
// buffer rings, and a real submit and wait (a NOP round trip), since a
// seccomp filter may allow io_uring_setup and refuse io_uring_enter.
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
	if err := r.FreeBufRing(br); err != nil {
		return fmt.Errorf("io_uring provided buffer rings: %w", err)
	}
	r.GetSQE().PrepNop()
	if _, err := r.SubmitAndWait(1); err != nil {
		return fmt.Errorf("io_uring_enter refused: %w", err)
	}
	cqe, err := r.PeekCQE()
	if err != nil || cqe == nil {
		return fmt.Errorf("io_uring NOP did not complete: %v", err)
	}
	r.CQESeen(cqe)
	return nil
}

func newUringBackend(cfg *Config, ev sink, log *slog.Logger) (*uringBackend, error) {
	ring, err := uring.Setup(cfg.RingEntries, uring.WithCQSize(cfg.RingEntries*8),
		uring.WithSingleIssuer(), uring.WithDeferTaskrun(), uring.WithClamp())
	if err != nil {
		return nil, err
	}
	b := &uringBackend{ev: ev, log: log, ring: ring, cqes: make([]*uring.CQE, cfg.Budget)}
	if cfg.BatchWait > 0 && ring.Features()&uring.FeatMinTimeout != 0 {
		b.act.enable(cfg.BatchWait, 2) // two completions per wake-up already halve the wake-ups
	}
	fail := func(err error) (*uringBackend, error) {
		b.release()
		return nil, err
	}
	if b.whole, err = newRecvRing(ring, bufGroup, 0, cfg.RecvBufferSize, cfg.RecvBuffers,
		initialRecvBuffers, false); err != nil {
		return fail(err)
	}
	b.setupSmallRing(cfg)
	if b.waker, err = uring.NewWaker(); err != nil {
		return fail(err)
	}
	if err := ring.RegisterRingFd(); err != nil {
		log.Debug("veloq: io_uring ring fd not registered", "err", err)
	}
	b.waker.PrepArm(b.sqe(), token(opWake, 0, 0))
	return b, nil
}

// setupSmallRing registers the ring of shared buffers (see smallRecv),
// as many as the whole ones, where the kernel can consume buffers
// incrementally; elsewhere every receive takes a whole buffer.
func (b *uringBackend) setupSmallRing(cfg *Config) {
	if cfg.noIncRing {
		return // tests: as on kernels without IOU_PBUF_RING_INC
	}
	var err error
	size := min(smallBufSize, cfg.RecvBufferSize)
	// The whole buffers' ids are 0 to RecvBuffers-1 (at most 32768 in a
	// ring), so these fit in 16 bits.
	b.small, err = newRecvRing(b.ring, smallBufGroup, uint16(cfg.RecvBuffers), size, cfg.RecvBuffers,
		smallRingStep, true)
	if err != nil {
		b.log.Debug("veloq: io_uring receive buffers not shared", "err", err)
		return
	}
	b.smallMax = int32(size / 16)
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

func (b *uringBackend) wake() { _ = b.waker.Wake() }

func (b *uringBackend) poll(timeout time.Duration) (bool, error) {
	if len(b.again) > 0 {
		timeout = 0
		b.acceptAgain()
	}
	if b.closeq.run(b.closeFD) {
		// The released reports come after the submission, and run
		// OnClose, which may queue output or close more: the loop goes
		// round again before it waits.
		timeout = 0
	}
	var err error
	switch {
	case b.ring.CQReady() > 0:
		// Completions from the last wait are still queued (more than one
		// budget's worth): dispatch them before asking the kernel for
		// more. With DEFER_TASKRUN the kernel runs receives only when the
		// loop waits for events, so not waiting keeps a backlog from
		// piling up (each paused connection's share of it is input it
		// must hold) and lets cancels go out before the next receives.
		if b.ring.SQReady() > 0 {
			_, err = b.ring.Submit()
		}
	case b.draining > 0:
		// Closes are under way. The ends of their operations (endRecv's
		// wake-ups, cancellations) complete as task work, which with
		// DEFER_TASKRUN the kernel runs only inside io_uring_enter,
		// first in first out, at most max(20, min_complete) items a pass
		// and two passes a call (Linux 6.13+). Asking for one
		// completion, a call ran 20 to 40 of them while a budget of
		// timers cancelled 64 operations an iteration, so in a mass
		// expiry the backlog grew to thousands and every other
		// connection's receive waited behind it: 56 iterations in
		// TestMassExpiryLetsOthersThrough, about 2,000 cancellations and
		// 13 ms of the loop's CPU with 10,000 connections. Asking for as
		// many as are owed, up to a budget, keeps pace with the timers;
		// the call does not wait for them, and the loop waits as usual
		// when it brought nothing back.
		_, err = b.ring.SubmitAndWaitTimeout(uint32(min(b.draining, len(b.cqes))), 0)
		if err == nil && timeout != 0 && b.ring.CQReady() == 0 {
			err = b.wait(timeout)
		}
	case timeout == 0:
		// GETEVENTS without waiting: with DEFER_TASKRUN completions are
		// only posted when the loop enters the kernel.
		_, err = b.ring.SubmitAndWaitTimeout(0, 0)
	default:
		err = b.wait(timeout)
	}
	b.sends = 0 // every case above submitted what was queued
	if len(b.closed) > 0 {
		b.reportClosed()
	}
	if err != nil && !errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
		return false, fmt.Errorf("io_uring_enter: %w", err)
	}
	n := b.ring.PeekBatchCQE(b.cqes)
	for i := 0; i < n; i++ {
		b.complete(b.cqes[i]) // valid until CQAdvance below
	}
	b.ring.CQAdvance(uint32(n))
	// Once a batch: every receive armed when a ring ran dry fails in the
	// same batch, and growing for each would grow the ring that many
	// times.
	for _, rr := range [...]*recvRing{b.whole, b.small} {
		if rr != nil && rr.starved {
			rr.starved = false
			rr.grow(rr.step)
		}
	}
	return n == len(b.cqes), nil
}

// wait submits and sleeps until completions arrive or timeout passes
// (< 0: no limit). With BatchWait it may ask for a batch (see batch): the
// kernel then returns when that many completions are ready, or, once
// BatchWait has passed, as soon as any is, so a guess too high costs at
// most BatchWait (plus the timer's wake-up), and an event that arrives
// after BatchWait is handed over at once. Many busy connections then wake
// the loop once per batch instead of about once per message; a loop that
// expects one completion waits plainly.
func (b *uringBackend) wait(timeout time.Duration) (err error) {
	want := b.batch()
	if want > 1 && b.sends > 0 {
		// Submit before a batched wait, and take what the submission
		// completed (a send with room in the socket buffer completes
		// during it) without sleeping: counted in the wait, those would
		// end the batch at BatchWait with no input in it.
		if _, err = b.ring.Submit(); err != nil || b.ring.CQReady() > 0 {
			return err
		}
	}
	b.act.inputs = 0
	switch {
	case want > 1:
		_, err = b.ring.SubmitAndWaitMin(want, timeout, b.act.wait)
	case timeout < 0:
		_, err = b.ring.SubmitAndWait(1)
	default:
		_, err = b.ring.SubmitAndWaitTimeout(1, timeout)
	}
	return err
}

// batch is how many completions the next wait asks for: as many as
// inputs arrived since the last wait, on the guess that a peer that got
// its answer sends again (request/response), but no more than one per
// batchShare connections that sent input in the last activity epoch
// (activity.share). A batch that needs every busy peer makes the peers
// and the loop take turns (measured at 3 ping-pong connections: 60% fewer
// req/s). A loop with fewer than two inputs to answer waits plainly
// without reading the clock.
func (b *uringBackend) batch() uint32 {
	if b.act.wait <= 0 || b.act.inputs < 2 {
		return 1
	}
	return min(b.act.inputs, b.act.share(), uint32(len(b.cqes)))
}

// conn returns the record a completion is for, or nil when the slot has
// been released and reopened since the operation was issued.
func (b *uringBackend) conn(slot, gen uint32) *uconn {
	if int(slot) >= b.conns.len() {
		return nil
	}
	if u := b.conns.at(slot); u.live(gen) {
		return u
	}
	return nil
}

// live reports whether u is still the record of the connection of
// generation gen: a report may close the slot or reopen it for another.
// A record never moves (table), so after a report the caller checks the
// record it holds instead of looking the slot up again.
func (u *uconn) live(gen uint32) bool { return u.gen&0xffffff == gen && u.fd >= 0 }

func (b *uringBackend) complete(cqe *uring.CQE) {
	op, slot, gen := untoken(cqe.UserData)
	switch op {
	case opWake:
		b.waker.Completed()
		if !b.closing {
			b.waker.PrepArm(b.sqe(), token(opWake, 0, 0))
		}
	case opAccept:
		b.acceptReady(slot, gen, cqe)
	case opRecv:
		b.received(slot, gen, cqe)
	case opSend:
		b.sent(slot, gen, cqe.Res)
	case opConnect:
		u := b.conn(slot, gen)
		if u == nil {
			return
		}
		u.ops--
		delete(b.dialing, slot)
		if b.settle(slot, u) {
			return
		}
		u.connecting = false
		b.ev.connected(slot, cqe.Err())
	case opPollIn:
		u := b.conn(slot, gen)
		if u == nil {
			return
		}
		if !cqe.More() {
			u.pollIn = false
			u.ops--
		}
		if b.settle(slot, u) || !u.watchIn {
			return
		}
		if !u.pollIn {
			b.armPollIn(slot, u) // the multishot poll ended (overflow, error)
		}
		b.ev.ready(slot, false)
	case opPollOut:
		u := b.conn(slot, gen)
		if u == nil {
			return
		}
		u.pollOut = false
		u.ops--
		if b.settle(slot, u) {
			return
		}
		b.ev.ready(slot, true)
	case opPktIn, opPktOut:
		b.packetCompleted(op, slot, gen, cqe)
	case opCancel:
		// Cancel results matter only through the cancelled ops' CQEs.
	case opClose:
		// Only a failure has a CQE (SQECQESkipSuccess); the slot was
		// released with the close queued, and the fd is gone either way.
		b.log.Debug("veloq: io_uring close failed", "err", cqe.Err())
	}
}

// settle finishes a closing connection once its last operation is back,
// and reports whether the record is closing (the completion is moot).
func (b *uringBackend) settle(slot uint32, u *uconn) bool {
	if !u.closing {
		return false
	}
	if u.ops == 0 {
		b.draining--
		b.closeq.push(slot)
	}
	return true
}

// closeFD closes the socket of slot, whose operations are all back, in
// the ring: the close goes into the submission queue behind the sends the
// iteration's flush queued, and runs when poll submits them, which then
// reports the slot released (reportClosed).
func (b *uringBackend) closeFD(slot uint32) {
	u := b.conns.at(slot)
	s := b.sqe()
	s.PrepClose(int(u.fd))
	s.SetUserData(token(opClose, slot, u.gen))
	s.SetFlags(uring.SQECQESkipSuccess)
	u.fd = -1
	u.q = nil
	b.closed = append(b.closed, slot)
}

// reportClosed reports released the slots whose closes poll queued, once
// the kernel has taken them (it runs a close as it takes it): a slot is
// released with its fd closed, so one that NumConns no longer counts
// holds no descriptor.
func (b *uringBackend) reportClosed() {
	for b.ring.SQReady() > 0 {
		if _, err := b.ring.Submit(); err != nil {
			runtime.Gosched() // EBUSY/EAGAIN/EINTR: try again, as sqe does
		}
	}
	for i, slot := range b.closed {
		b.closed[i] = 0
		b.ev.released(slot)
	}
	b.closed = b.closed[:0]
}

func (b *uringBackend) received(slot, gen uint32, cqe *uring.CQE) {
	res := cqe.Res
	var rr *recvRing
	var in []byte
	bid, hasBuf := cqe.BufferID()
	if hasBuf {
		rr = b.ringOf(bid)
		in = rr.take(bid, res, cqe.BufMore())
	}
	u := b.conn(slot, gen)
	if u == nil {
		if in != nil {
			rr.recycle(bid)
		}
		return
	}
	if !cqe.More() {
		u.recv, u.recvCancel = false, false
		u.ops--
	}
	switch {
	case u.closing:
		if in != nil {
			rr.recycle(bid)
		}
		b.settle(slot, u)
		return
	case res > 0:
		b.adapt(slot, u, rr, res)
		b.act.input(&u.epoch)
		if in != nil && !b.ev.input(slot, in, int32(bid)) {
			rr.recycle(bid)
		}
	case res == 0:
		if !cqe.More() {
			u.eof = true
			b.ev.eof(slot)
		}
	case -res == int32(unix.ENOBUFS):
		// Out of provided buffers: the ring gets more at the end of the
		// batch if its arena has any left (poll), else they come back as
		// handlers finish; a connection the shared ring cannot serve any
		// more takes whole buffers. Re-armed below when reading should go
		// on; the submission goes out after the growth.
		rr := b.whole
		if !u.recvWhole {
			rr = b.small
			u.whole = u.whole || rr.full()
		}
		rr.starved = true
	case -res == int32(unix.ECANCELED), -res == int32(unix.EINTR):
		// Stopped: re-armed below when reading should go on.
	default:
		b.ev.failed(slot, os.NewSyscallError("recv", cqe.Err()))
	}
	// The report may have closed, reopened or paused the slot.
	if !u.live(gen) || u.closing || u.recv {
		return
	}
	switch {
	case u.reading && !u.eof:
		b.armRecv(slot, u)
	case u.watchIn && !u.pollIn:
		b.armPollIn(slot, u) // the receive is over: the watch begins
	}
}

// adapt sets how slot receives after a receive of res bytes into a
// buffer of rr, and ends a multishot recv armed otherwise (its ECANCELED
// completion re-arms).
//
// A receive that fills a whole buffer marks a bulk sender. A multishot
// recv would take everything its socket holds (megabytes) in one run of
// the kernel's task work, all of it input the connection must keep if it
// is paused meanwhile. One buffer at a time instead, it holds at most one
// beyond a pause, and a submission per full buffer costs little next to
// the bytes. A run of short receives switches back to multishot (unless
// the connection is paced: see pace), which saves a submission per
// message for connections of small messages (a bulk stream has short
// receives too, now and then, where a segment ends). New connections
// start one buffer at a time, so a sender that floods from its first byte
// is never ahead.
//
// Independently, the size of its receives moves a connection between the
// shared buffers and whole ones (see smallRecv).
func (b *uringBackend) adapt(slot uint32, u *uconn, rr *recvRing, res int32) {
	multishot := u.recv && !u.recvCancel && u.mode == recvMultishot
	if rr == b.whole && int(res) == rr.arena.BufSize() {
		u.shorts = 0
		if u.mode == recvMultishot {
			u.mode = recvOneshot
		}
	} else if u.mode == recvOneshot {
		if u.shorts++; u.shorts >= shortsToMultishot {
			u.mode = recvMultishot // from the next arm on
		}
	}
	if b.small != nil {
		switch {
		case res >= b.smallMax:
			u.whole, u.smalls = true, 0
		case u.whole:
			if u.smalls++; u.smalls >= shortsToMultishot {
				u.whole, u.smalls = false, 0
			}
		}
	}
	if multishot && (u.mode != recvMultishot || u.whole != u.recvWhole) {
		u.recvCancel = true
		b.cancel(token(opRecv, slot, u.gen))
	}
}

func (b *uringBackend) sent(slot, gen uint32, res int32) {
	u := b.conn(slot, gen)
	if u == nil {
		return
	}
	u.sending = 0
	u.ops--
	if int(slot) < len(b.msgs) && b.msgs[slot] != nil {
		clear(b.msgs[slot].iov[:]) // hold no segment past the send
	}
	if b.settle(slot, u) {
		return
	}
	if res < 0 {
		b.ev.failed(slot, os.NewSyscallError("send", syscall.Errno(-res)))
		return
	}
	b.ev.sent(slot, int(res))
	// The queue goes on from where the kernel stopped, unless the report
	// closed the slot or started the next send itself.
	if u.live(gen) && !u.closing && u.sending == 0 && u.q.len() > 0 {
		b.submitSend(slot, u)
	}
}

// acceptReady handles a completion of listener idx's poll: connections
// wait (the epoll set is readable), or the poll ended.
func (b *uringBackend) acceptReady(idx, gen uint32, cqe *uring.CQE) {
	if int(idx) >= len(b.lns) || b.lns[idx].gen&0xffffff != gen || b.lns[idx].fd < 0 {
		return
	}
	ln := &b.lns[idx]
	if !cqe.More() {
		ln.armed = false
	}
	switch {
	case ln.closing:
		if !ln.armed {
			b.listenerDone(idx, ln)
		}
		return
	case cqe.Res >= 0:
		b.accept(idx)
		ln = &b.lns[idx] // reports may grow the table
	case -cqe.Res != int32(unix.ECANCELED) && !ln.backOff:
		backOff := b.ev.acceptFailed(idx, os.NewSyscallError("poll", cqe.Err()))
		ln = &b.lns[idx]
		if backOff {
			b.stopAccepting(idx, ln)
			return
		}
	}
	if !ln.armed && !ln.backOff && !ln.closing && ln.fd >= 0 {
		b.armAccept(idx, ln)
	}
}

// accept takes the connections waiting on listener idx (acceptBatch).
func (b *uringBackend) accept(idx uint32) {
	more, backOff := acceptBatch(b.ev, idx, func() int {
		if ln := &b.lns[idx]; !ln.closing && !ln.backOff {
			return ln.fd
		}
		return -1
	})
	switch {
	case backOff:
		b.stopAccepting(idx, &b.lns[idx])
	case more:
		// The poll reports new connections, not the ones left: come back
		// on the next poll.
		b.again = append(b.again, idx)
	}
}

// acceptAgain goes on with listeners whose accepting stopped at the limit.
func (b *uringBackend) acceptAgain() {
	work := b.again
	b.again = nil
	for _, idx := range work {
		if ln := &b.lns[idx]; ln.fd >= 0 && !ln.closing && !ln.backOff {
			b.accept(idx)
		}
	}
	if b.again == nil {
		b.again = work[:0] // keep the array
	}
}

// stopAccepting backs off after an accept error until listen.
func (b *uringBackend) stopAccepting(idx uint32, ln *ulisten) {
	ln.backOff = true
	if ln.armed {
		b.cancel(token(opAccept, idx, ln.gen))
	}
}

// armAccept polls listener idx's epoll set. The ring never refers to the
// listening socket itself: a request holds a reference to its file while
// in flight, and a multishot accept is always in flight, so when the
// process was killed the socket outlived it, listening, until the ring's
// teardown (deferred by the kernel to workqueues after the exit) dropped
// that reference: 4–25 ms after the process was reaped, during which a
// restart's bind failed with EADDRINUSE (19 times in 20; on epoll 0).
// The epoll set holds no reference to what it watches, so the exit's
// close of the listener's descriptor closes the socket, as on epoll; the
// ring pins only the epoll set. The price is one accept4 per wake-up
// that finds no connection left (EAGAIN): the accept4 per connection
// returns the peer's address, which after a multishot accept took a
// getpeername.
func (b *uringBackend) armAccept(idx uint32, ln *ulisten) {
	s := b.sqe()
	s.PrepPollMultishot(ln.ep, uint32(unix.POLLIN))
	s.SetUserData(token(opAccept, idx, ln.gen))
	ln.armed = true
}

// listenerDone reports listener idx closed once its poll is over.
func (b *uringBackend) listenerDone(idx uint32, ln *ulisten) {
	unix.Close(ln.ep)
	ln.fd, ln.ep = -1, -1
	b.ev.listenerClosed(idx)
}

func (b *uringBackend) cancel(ud uint64) {
	s := b.sqe()
	s.PrepCancel(ud, 0)
	s.SetUserData(token(opCancel, 0, 0))
	s.SetFlags(uring.SQECQESkipSuccess)
}

// listen starts accepting on fd through an epoll set of its own (see
// armAccept): level-triggered, so the ring's poll is ready, at once if
// connections already wait, for as long as any does.
func (b *uringBackend) listen(idx uint32, fd int) error {
	for int(idx) >= len(b.lns) {
		b.lns = append(b.lns, ulisten{fd: -1, ep: -1})
	}
	ln := &b.lns[idx]
	if ln.fd != fd {
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return os.NewSyscallError("epoll_create1", err)
		}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN}); err != nil {
			unix.Close(ep)
			return os.NewSyscallError("epoll_ctl", err)
		}
		*ln = ulisten{fd: fd, ep: ep, gen: ln.gen + 1}
	}
	ln.backOff = false
	if !ln.armed {
		b.armAccept(idx, ln)
	}
	return nil
}

func (b *uringBackend) unlisten(idx uint32) {
	ln := &b.lns[idx]
	ln.closing = true
	if ln.armed {
		b.cancel(token(opAccept, idx, ln.gen))
		return // the ECANCELED completion finishes the close
	}
	b.listenerDone(idx, ln)
}

func (b *uringBackend) open(slot uint32, fd int, q *outQueue, dial unix.Sockaddr) error {
	for int(slot) >= b.conns.len() {
		b.conns.add(uconn{fd: -1})
	}
	u := b.conns.at(slot)
	*u = uconn{fd: int32(fd), gen: (u.gen + 1) & 0xffffff, q: q, mode: recvOneshot}
	if dial == nil {
		return nil
	}
	raw, n, err := sock.Raw(dial)
	if err != nil {
		u.fd = -1
		return err
	}
	if b.dialing == nil {
		b.dialing = make(map[uint32]*unix.RawSockaddrAny)
	}
	b.dialing[slot] = raw
	u.connecting = true
	s := b.sqe()
	s.PrepConnect(fd, raw, n)
	s.SetUserData(token(opConnect, slot, u.gen))
	u.ops++
	return nil
}

func (b *uringBackend) armRecv(slot uint32, u *uconn) {
	s := b.sqe()
	if u.mode != recvMultishot {
		s.PrepRecv(int(u.fd), nil, 0)
	} else {
		s.PrepRecvMultishot(int(u.fd), nil, 0)
	}
	s.SetFlags(uring.SQEBufferSelect)
	u.recvWhole = u.whole || b.small == nil
	if u.recvWhole {
		s.SetBufGroup(bufGroup)
	} else {
		s.SetBufGroup(smallBufGroup)
	}
	s.SetUserData(token(opRecv, slot, u.gen))
	u.recv = true
	u.ops++
}

func (b *uringBackend) setReading(slot uint32, on bool) {
	u := b.conns.at(slot)
	u.reading = on
	switch {
	case on && !u.recv && !u.eof && !u.closing:
		b.armRecv(slot, u)
	case !on && u.recv && !u.recvCancel:
		u.recvCancel = true
		b.cancel(token(opRecv, slot, u.gen))
		// Submit now: the kernel runs receives as deferred task work when
		// the loop next waits, so a cancel that waited for that wait would
		// let one more batch of input in (up to the whole socket buffer).
		_, _ = b.ring.Submit()
	}
	// A cancel in flight with reading wanted again: the ECANCELED
	// completion re-arms.
}

// pace keeps slot on one-shot receives for good. A multishot recv takes
// everything its socket holds in one run of the kernel's task work (up to
// the free buffers of the ring), and once the handler pauses, all of it
// past the first buffer is copied into the connection's heap input. A
// connection whose handler holds input back is one where that happens
// again: a relay to a slow reader sees short receives whenever the reader
// frees a little room, which would switch it back to multishot, and the
// next burst arrived whole (3.5 MiB of input on one proxy connection, with
// the proxy's 64 buffers of 64 KiB). A submission per receive is the cost,
// on connections that are paced anyway.
func (b *uringBackend) pace(slot uint32) {
	u := b.conns.at(slot)
	was := u.mode
	u.mode = recvPaced
	if was == recvMultishot && u.recv && !u.recvCancel {
		// The ECANCELED completion re-arms, one-shot, if reading goes on.
		// Submitted now for the reason setReading gives.
		u.recvCancel = true
		b.cancel(token(opRecv, slot, u.gen))
		_, _ = b.ring.Submit()
	}
}

func (b *uringBackend) submitSend(slot uint32, u *uconn) {
	s := b.sqe()
	if u.q.segments() > 1 {
		// Several segments go in one SENDMSG, as epoll's writev: a head
		// and the body part that overflowed into the next segment were
		// two sends, the second only after the first's completion.
		m := b.sendmsg(slot)
		k, n := u.q.peekv(m.iov[:])
		m.hdr.Iov = &m.iov[0]
		m.hdr.SetIovlen(k)
		s.PrepSendmsg(int(u.fd), &m.hdr, unix.MSG_NOSIGNAL)
		u.sending = int32(n) // at most len(m.iov) segments
	} else {
		p := u.q.peek()
		s.PrepSend(int(u.fd), p, unix.MSG_NOSIGNAL)
		u.sending = int32(len(p)) // a segment: at most maxSeg or a receive buffer
	}
	s.SetUserData(token(opSend, slot, u.gen))
	u.ops++
	b.sends++
}

// usendmsg is a slot's gathered send: the header and iovecs the kernel
// reads. It is heap memory that b.msgs keeps referenced for the slot's
// life, and a slot has one send in flight at a time, so the kernel never
// reads it after it was changed or released.
type usendmsg struct {
	hdr unix.Msghdr
	iov [8]unix.Iovec
}

// sendmsg returns slot's gathered-send record, made on its first use.
func (b *uringBackend) sendmsg(slot uint32) *usendmsg {
	for int(slot) >= len(b.msgs) {
		b.msgs = append(b.msgs, nil)
	}
	m := b.msgs[slot]
	if m == nil {
		m = new(usendmsg)
		b.msgs[slot] = m
	}
	return m
}

func (b *uringBackend) send(slot uint32) {
	u := b.conns.at(slot)
	if u.sending > 0 || u.closing || u.connecting || u.q.len() == 0 {
		return // the completion goes on with what was added meanwhile
	}
	b.submitSend(slot, u)
}

// watch arms a poll: edge-triggered multishot POLLIN for input (no
// IORING_POLL_ADD_LEVEL: the splice pump reads until EAGAIN, and every
// later arrival posts a new completion), one-shot POLLOUT for output.
// IORING_OP_SPLICE is not used: the kernel runs it on an io-wq worker
// thread, and on a non-blocking socket it fails with EAGAIN instead of
// waiting for data.
func (b *uringBackend) watch(slot uint32, out, on bool) {
	u := b.conns.at(slot)
	if u.closing {
		return
	}
	switch {
	case out && on && !u.pollOut:
		sq := b.sqe()
		sq.PrepPollAdd(int(u.fd), uint32(unix.POLLOUT))
		sq.SetUserData(token(opPollOut, slot, u.gen))
		u.pollOut = true
		u.ops++
	case out && !on && u.pollOut:
		b.cancel(token(opPollOut, slot, u.gen))
	case !out && on:
		u.watchIn = true
		if !u.recv && !u.pollIn {
			b.armPollIn(slot, u)
		} // else: armed when the receive's last completion comes
	case !out && !on:
		u.watchIn = false
		if u.pollIn {
			b.cancel(token(opPollIn, slot, u.gen))
		}
	}
}

func (b *uringBackend) armPollIn(slot uint32, u *uconn) {
	sq := b.sqe()
	sq.PrepPollMultishot(int(u.fd), uint32(unix.POLLIN|unix.POLLRDHUP))
	sq.SetUserData(token(opPollIn, slot, u.gen))
	u.pollIn = true
	u.ops++
}

// initialRecvBuffers is how many receive buffers the ring starts with
// (at most Config.RecvBuffers).
const initialRecvBuffers = 8

// ringOf returns the ring of buffer id bid.
func (b *uringBackend) ringOf(bid uint16) *recvRing {
	if b.small != nil && b.small.owns(bid) {
		return b.small
	}
	return b.whole
}

func (b *uringBackend) recycle(bid uint16) { b.ringOf(bid).recycle(bid) }

func (b *uringBackend) close(slot uint32) {
	u := b.conns.at(slot)
	if u.closing {
		return
	}
	u.closing = true
	b.draining++ // until settle queues the close
	u.reading, u.watchIn = false, false
	if u.ops == 0 {
		b.settle(slot, u)
		return
	}
	// The receive, the one operation of an idle connection, is ended by
	// endRecv. Every other is cancelled by its user_data, which the kernel
	// finds in its cancel hash (see endRecv for the cost). A cancel by fd
	// (ASYNC_CANCEL_FD|ALL) instead scans every armed poll of the ring, the
	// idle connections' receives included, at least twice: profiled with
	// 8,000 idle HTTP connections reaching the head timeout together, those
	// scans (io_cancel_req_match) took two thirds of the loop's CPU and
	// stalled it for seconds, a cost quadratic in the connections.
	if u.recv && !u.recvCancel {
		u.recvCancel = true
		if !endRecv(int(u.fd)) {
			b.cancel(token(opRecv, slot, u.gen))
		}
	}
	if u.sending > 0 {
		b.cancel(token(opSend, slot, u.gen))
	}
	if u.connecting {
		b.cancel(token(opConnect, slot, u.gen))
	}
	if u.pollIn {
		b.cancel(token(opPollIn, slot, u.gen))
	}
	if u.pollOut {
		b.cancel(token(opPollOut, slot, u.gen))
	}
}

// endRecv ends the receive armed on socket fd without a cancel:
// shutdown(SHUT_RD) wakes the socket's waiters, and the receive comes back
// with 0 (or with input already queued, then 0) through the same deferred
// task work as a cancellation. A cancel finds its request in the ring's
// cancel hash, which has at most 256 buckets: with 20,000 idle
// connections each armed receive shares a bucket with about 80 others,
// and a cancel walks half of them. Profiled (perf, masstimeout -n 19900),
// that walk (io_poll_find) took 17% of the loop's CPU in the expiry, a
// cost quadratic in the connections; the shutdown costs one system call,
// whatever their number (the loop's CPU in the expiry, three runs each:
// 370-640 ms with cancels, 290-320 ms with shutdowns). It sends nothing (the FIN goes with the close),
// so an abort after SO_LINGER 0 still resets. It reports false if the
// socket refused (the caller cancels then); ENOTCONN, for a connection
// the peer reset, still wakes the waiters.
func endRecv(fd int) bool {
	err := unix.Shutdown(fd, unix.SHUT_RD)
	return err == nil || err == unix.ENOTCONN
}

// shutdown cancels the wake-up read and waits for its completion, so the
// kernel holds no operation when the ring and buffer memory go away.
func (b *uringBackend) shutdown() error {
	b.closing = true
	if b.waker.Armed() {
		b.cancel(token(opWake, 0, 0))
		deadline := time.Now().Add(time.Second)
		for b.waker.Armed() && time.Now().Before(deadline) {
			if _, err := b.poll(10 * time.Millisecond); err != nil {
				break
			}
		}
	}
	return b.release()
}

func (b *uringBackend) release() error {
	var errs []error
	for i := range b.lns {
		if ep := b.lns[i].ep; ep >= 0 {
			unix.Close(ep) // a listener the loop did not unlisten
			b.lns[i].ep = -1
		}
	}
	errs = append(errs, b.prx.free(b.ring))
	rings := [...]*recvRing{b.whole, b.small}
	for _, rr := range rings {
		if rr != nil {
			errs = append(errs, b.ring.FreeBufRing(rr.br))
		}
	}
	if b.ring != nil {
		errs = append(errs, b.ring.Close())
	}
	for _, rr := range rings {
		if rr != nil {
			errs = append(errs, rr.arena.Close()) // the kernel is done with it
		}
	}
	if b.waker != nil {
		errs = append(errs, b.waker.Close())
	}
	return errors.Join(errs...)
}
