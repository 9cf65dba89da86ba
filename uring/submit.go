//go:build linux

package uring

import (
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// enter calls io_uring_enter. It uses unix.Syscall6, which tells the Go
// scheduler we are in a syscall so a blocking wait releases the P.
func (r *Ring) enter(toSubmit, minComplete, flags uint32, arg unsafe.Pointer, argSz uintptr) (int, syscall.Errno) {
	// unsafe: arg is nil or points into the heap-allocated Ring (r.arg),
	// which r keeps alive and the GC does not move; the conversion happens
	// in the call expression as the unsafe.Pointer rules require.
	if minComplete == 0 {
		// Nothing to wait for: the call submits and runs completions
		// without sleeping, so it skips the runtime's syscall bookkeeping
		// (entersyscall/exitsyscall, the P's hand-off), which costs as much
		// as a small submission. A raw system call is not preemptible, but
		// this one returns as soon as the kernel has done the work queued.
		n, _, errno := unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(r.enterFd), uintptr(toSubmit),
			0, uintptr(flags|r.enterFlags), uintptr(arg), argSz)
		return int(n), errno
	}
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.enterFd), uintptr(toSubmit),
		uintptr(minComplete), uintptr(flags|r.enterFlags), uintptr(arg), argSz)
	return int(n), errno
}

// GetSQE returns the next free SQE, zeroed, or nil when the SQ is full
// (submit, then retry). The SQE belongs to the caller until the next Submit.
func (r *Ring) GetSQE() *SQE {
	// The kernel moves the SQ head as it consumes entries; an atomic load
	// pairs with its store-release.
	head := atomic.LoadUint32(r.sqHead)
	tail := r.sqeTail
	if tail-head >= r.sqEntries {
		return nil
	}
	s := &r.sqes[tail&r.sqMask]
	r.sqeTail = tail + 1
	*s = SQE{}
	return s
}

// SQReady returns the number of SQEs handed out (or published) that the
// kernel has not consumed yet.
func (r *Ring) SQReady() uint32 {
	return r.sqeTail - atomic.LoadUint32(r.sqHead)
}

// SQSpace returns how many more SQEs GetSQE can hand out right now.
func (r *Ring) SQSpace() uint32 {
	return r.sqEntries - r.SQReady()
}

// flushSQ publishes locally prepared SQEs by storing the SQ tail (a
// release: the SQE contents written before are visible to the kernel once
// it loads the tail) and returns how many entries the kernel has yet to
// consume.
func (r *Ring) flushSQ() uint32 {
	tail := r.sqeTail
	if r.sqeHead != tail {
		r.sqeHead = tail
		atomic.StoreUint32(r.sqTail, tail)
	}
	return tail - atomic.LoadUint32(r.sqHead)
}

// sqNeedsEnter reports whether pending SQEs require io_uring_enter. Only
// SQPOLL rings can skip it, unless the poller thread went to sleep.
func (r *Ring) sqNeedsEnter(pending uint32, flags *uint32) bool {
	if pending == 0 {
		return false
	}
	if r.flags&SetupSQPoll == 0 {
		return true
	}
	// The tail store in flushSQ and this load are both sequentially
	// consistent, which gives the full barrier the kernel protocol asks for
	// between publishing the tail and checking NEED_WAKEUP.
	if atomic.LoadUint32(r.sqFlags)&SQNeedWakeup != 0 {
		*flags |= EnterSQWakeup
		return true
	}
	return false
}

// cqNeedsFlush reports whether completions are parked in the kernel: CQ
// overflow backlog (IORING_SQ_CQ_OVERFLOW) or pending task work
// (IORING_SQ_TASKRUN, set with COOP/DEFER_TASKRUN + TASKRUN_FLAG). Either
// one needs an io_uring_enter with GETEVENTS to move CQEs into the ring.
func (r *Ring) cqNeedsFlush() bool {
	return atomic.LoadUint32(r.sqFlags)&(SQCQOverflow|SQTaskrun) != 0
}

func (r *Ring) cqNeedsEnter() bool {
	return r.cqAlwaysEnter || r.cqNeedsFlush()
}

// Submit publishes prepared SQEs and tells the kernel about them. It
// returns the number submitted. unix.EAGAIN or unix.EBUSY mean the kernel
// is short of resources or has a CQ backlog it cannot flush: reap
// completions and submit again (the SQEs stay queued).
func (r *Ring) Submit() (int, error) {
	return r.submit(0)
}

// SubmitAndWait submits and blocks until at least waitNr CQEs are ready.
func (r *Ring) SubmitAndWait(waitNr uint32) (int, error) {
	return r.submit(waitNr)
}

func (r *Ring) submit(waitNr uint32) (int, error) {
	if r.closed {
		return 0, ErrClosed
	}
	for {
		pending := r.flushSQ()
		var flags uint32
		need := r.sqNeedsEnter(pending, &flags)
		if waitNr > 0 || r.cqNeedsEnter() {
			flags |= EnterGetevents
			need = true
		}
		if !need {
			return int(pending), nil
		}
		n, errno := r.enter(pending, waitNr, flags, nil, 0)
		if errno == 0 {
			return n, nil
		}
		if errno == unix.EINTR {
			continue
		}
		return 0, errno
	}
}

// enterExt does one EXT_ARG enter waiting at most d (a negative d counts
// as 0) for waitNr CQEs; with minWait > 0 the kernel waits up to minWait
// for them, then returns as soon as it has any. The timespec and the
// getevents argument are written into the Ring (heap), never the stack.
func (r *Ring) enterExt(toSubmit, waitNr, flags uint32, d, minWait time.Duration) (int, syscall.Errno) {
	r.ts = unix.NsecToTimespec(int64(max(d, 0)))
	// unsafe: r.ts lives in the heap-allocated Ring, which stays reachable
	// through r for the whole call; heap objects do not move.
	r.arg = geteventsArg{ts: uint64(uintptr(unsafe.Pointer(&r.ts))), minWaitUsec: uint32(minWait / time.Microsecond)}
	return r.enter(toSubmit, waitNr, flags|EnterGetevents|EnterExtArg, unsafe.Pointer(&r.arg), unsafe.Sizeof(r.arg))
}

// noLimit stands for "no timeout" in a batched wait: the kernel ends a
// min-wait that has no overall timeout when the min-wait expires, events
// or not, so an unlimited wait passes a long one instead.
const noLimit = time.Hour

// SubmitAndWaitMin submits pending SQEs and waits for waitNr CQEs, but
// for no longer than minWait once at least one CQE is ready; with none
// ready it waits for the first, up to d (d < 0: without limit). This is
// liburing's io_uring_submit_and_wait_min_timeout: a batch of completions
// per wake-up under load, no added wait for a lone event that arrives
// after minWait. Needs IORING_FEAT_MIN_TIMEOUT (6.12+); without it, it
// returns unix.EOPNOTSUPP. Running out of time is not an error.
func (r *Ring) SubmitAndWaitMin(waitNr uint32, d, minWait time.Duration) (int, error) {
	if r.closed {
		return 0, ErrClosed
	}
	if r.features&FeatMinTimeout == 0 {
		return 0, unix.EOPNOTSUPP
	}
	if d < 0 {
		d = noLimit
	}
	return r.waitExt(waitNr, d, minWait)
}

// SubmitAndWaitTimeout submits pending SQEs and waits up to d for waitNr
// CQEs. Running out of time is not an error: it returns (submitted, nil).
// d < 0 waits without a timeout. Needs IORING_FEAT_EXT_ARG (5.11+).
func (r *Ring) SubmitAndWaitTimeout(waitNr uint32, d time.Duration) (int, error) {
	if d < 0 {
		return r.SubmitAndWait(waitNr)
	}
	if r.closed {
		return 0, ErrClosed
	}
	if r.features&FeatExtArg == 0 {
		return 0, unix.EOPNOTSUPP
	}
	return r.waitExt(waitNr, d, 0)
}

// waitExt is the EXT_ARG submit-and-wait loop of SubmitAndWaitTimeout and
// SubmitAndWaitMin: an interrupted wait goes on with the time left.
func (r *Ring) waitExt(waitNr uint32, d, minWait time.Duration) (int, error) {
	var start time.Time
	remaining := d
	for {
		pending := r.flushSQ()
		var flags uint32
		r.sqNeedsEnter(pending, &flags)
		n, errno := r.enterExt(pending, waitNr, flags, remaining, minWait)
		switch errno {
		case 0:
			return n, nil
		case unix.ETIME:
			// The kernel reports the submit count when it submitted
			// anything; an ETIME result therefore means nothing was.
			return 0, nil
		case unix.EINTR:
			if start.IsZero() {
				// Lazily started clock: interrupted waits are rare.
				start = time.Now()
			}
			remaining = d - time.Since(start) // enterExt clamps a negative rest to 0
			continue
		}
		return 0, errno
	}
}

// peek returns the CQE at the head, or nil.
func (r *Ring) peek() *CQE {
	head := atomic.LoadUint32(r.cqHead)
	// Load-acquire of the kernel's tail orders the CQE reads after it.
	if atomic.LoadUint32(r.cqTail) != head {
		return &r.cqes[head&r.cqMask]
	}
	return nil
}

// getEvents enters with GETEVENTS and no wait to flush overflow/task work.
func (r *Ring) getEvents() syscall.Errno {
	for {
		_, errno := r.enter(0, 0, EnterGetevents, nil, 0)
		if errno != unix.EINTR {
			return errno
		}
	}
}

// GetEvents enters the kernel with GETEVENTS and no wait, which runs
// deferred task work and flushes the CQ overflow list into the CQ.
// PeekCQE and PeekBatchCQE already do this when the SQ flags ask for it.
func (r *Ring) GetEvents() error {
	if r.closed {
		return ErrClosed
	}
	if errno := r.getEvents(); errno != 0 {
		return errno
	}
	return nil
}

// PeekCQE returns the next CQE without blocking, or unix.EAGAIN. It flushes
// the kernel's overflow list / deferred task work when the SQ flags say so.
// Mark the CQE consumed with CQESeen.
func (r *Ring) PeekCQE() (*CQE, error) {
	if r.closed {
		return nil, ErrClosed
	}
	if c := r.peek(); c != nil {
		return c, nil
	}
	if r.cqNeedsEnter() {
		r.getEvents()
		if c := r.peek(); c != nil {
			return c, nil
		}
	}
	return nil, unix.EAGAIN
}

// WaitCQE blocks until a CQE is ready and returns it (not consumed). It does
// not submit: call Submit first, or use SubmitAndWait.
func (r *Ring) WaitCQE() (*CQE, error) {
	if r.closed {
		return nil, ErrClosed
	}
	for {
		if c := r.peek(); c != nil {
			return c, nil
		}
		_, errno := r.enter(0, 1, EnterGetevents, nil, 0)
		switch errno {
		case 0, unix.EINTR:
			continue
		}
		if c := r.peek(); c != nil {
			return c, nil
		}
		return nil, errno
	}
}

// WaitCQETimeout is WaitCQE bounded by d; on timeout it returns unix.ETIME.
// d < 0 waits forever.
func (r *Ring) WaitCQETimeout(d time.Duration) (*CQE, error) {
	if d < 0 {
		return r.WaitCQE()
	}
	if r.closed {
		return nil, ErrClosed
	}
	if r.features&FeatExtArg == 0 {
		return nil, unix.EOPNOTSUPP
	}
	if c := r.peek(); c != nil {
		return c, nil
	}
	start := time.Now()
	for {
		remaining := d - time.Since(start)
		if remaining < 0 {
			remaining = 0
		}
		_, errno := r.enterExt(0, 1, 0, remaining, 0)
		if c := r.peek(); c != nil {
			return c, nil
		}
		switch errno {
		case 0, unix.EINTR:
			if remaining == 0 {
				return nil, unix.ETIME
			}
			continue
		}
		return nil, errno
	}
}

// PeekBatchCQE stores pointers to up to len(cqes) ready CQEs in cqes and
// returns how many. The CQEs stay owned by the ring until CQAdvance. It
// does not allocate; it enters the kernel only when the SQ flags report an
// overflow backlog or pending task work and the CQ is empty.
func (r *Ring) PeekBatchCQE(cqes []*CQE) int {
	if r.closed {
		return 0
	}
	head := atomic.LoadUint32(r.cqHead)
	ready := atomic.LoadUint32(r.cqTail) - head
	if ready == 0 && r.cqNeedsEnter() {
		r.getEvents()
		ready = atomic.LoadUint32(r.cqTail) - head
	}
	n := min(int(ready), len(cqes))
	mask := r.cqMask
	for i := 0; i < n; i++ {
		cqes[i] = &r.cqes[(head+uint32(i))&mask]
	}
	return n
}

// CQAdvance marks n CQEs consumed; the kernel may reuse their slots after
// this (store-release of the CQ head).
func (r *Ring) CQAdvance(n uint32) {
	if n == 0 {
		return
	}
	atomic.StoreUint32(r.cqHead, atomic.LoadUint32(r.cqHead)+n)
}

// CQESeen marks one CQE (the one at the head) consumed.
func (r *Ring) CQESeen(c *CQE) { r.CQAdvance(1) }

// CQReady returns the number of CQEs in the ring waiting to be consumed.
func (r *Ring) CQReady() uint32 {
	return atomic.LoadUint32(r.cqTail) - atomic.LoadUint32(r.cqHead)
}

// CQOverflow returns the kernel's count of CQEs it had to drop (only when
// it could not even allocate an overflow entry; with FEAT_NODROP ordinary
// overflow is buffered and flushed, not dropped).
func (r *Ring) CQOverflow() uint32 { return atomic.LoadUint32(r.cqOverflow) }

// SQDropped returns the kernel's count of invalid SQ indices it skipped.
func (r *Ring) SQDropped() uint32 { return atomic.LoadUint32(r.sqDropped) }
