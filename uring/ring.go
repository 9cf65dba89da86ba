//go:build linux

package uring

import (
	"errors"
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// config collects Setup options.
type config struct {
	flags  uint32
	cqSize uint32
	sqIdle uint32
}

// Option configures Setup.
type Option func(*config)

// WithCQSize asks for a CQ of n entries (IORING_SETUP_CQSIZE).
func WithCQSize(n uint32) Option {
	return func(c *config) { c.flags |= SetupCQSize; c.cqSize = n }
}

// WithSingleIssuer promises that only one task (OS thread) submits
// (IORING_SETUP_SINGLE_ISSUER). The caller must runtime.LockOSThread and use
// the ring only from that thread: the kernel binds the ring to the thread
// that created it and refuses io_uring_enter from any other with EEXIST.
func WithSingleIssuer() Option {
	return func(c *config) { c.flags |= SetupSingleIssuer }
}

// WithDeferTaskrun defers completion work until the issuer enters the kernel
// with GETEVENTS (IORING_SETUP_DEFER_TASKRUN; implies SINGLE_ISSUER, and
// asks for TASKRUN_FLAG so peeks know when a flush is needed).
func WithDeferTaskrun() Option {
	return func(c *config) {
		c.flags |= SetupSingleIssuer | SetupDeferTaskrun | SetupTaskrunFlag
	}
}

// WithCoopTaskrun sets IORING_SETUP_COOP_TASKRUN and IORING_SETUP_TASKRUN_FLAG.
func WithCoopTaskrun() Option {
	return func(c *config) { c.flags |= SetupCoopTaskrun | SetupTaskrunFlag }
}

// WithSubmitAll keeps submitting a batch after one SQE fails (IORING_SETUP_SUBMIT_ALL).
func WithSubmitAll() Option {
	return func(c *config) { c.flags |= SetupSubmitAll }
}

// WithClamp clamps too-large entry counts instead of failing (IORING_SETUP_CLAMP).
func WithClamp() Option {
	return func(c *config) { c.flags |= SetupClamp }
}

// WithSQPoll starts a kernel SQ polling thread that sleeps after idle
// (IORING_SETUP_SQPOLL).
func WithSQPoll(idle time.Duration) Option {
	return func(c *config) {
		c.flags |= SetupSQPoll
		c.sqIdle = uint32(idle / time.Millisecond)
	}
}

// ErrUnavailable is matched (errors.Is) by every SetupError caused by ENOSYS,
// EPERM, ENOMEM or EINVAL: io_uring cannot be used here with these options,
// fall back to another backend.
var ErrUnavailable = errors.New("uring: io_uring unavailable")

// ErrClosed is returned by operations on a closed Ring.
var ErrClosed = errors.New("uring: ring closed")

// SetupError reports why io_uring_setup (or mapping its rings) failed.
type SetupError struct {
	Errno  syscall.Errno
	Reason string
}

func (e *SetupError) Error() string {
	return fmt.Sprintf("uring: io_uring_setup: %v: %s", e.Errno, e.Reason)
}

// Unwrap returns the errno so errors.Is(err, unix.EPERM) works.
func (e *SetupError) Unwrap() error { return e.Errno }

// Is makes errors.Is(err, ErrUnavailable) true for the "no io_uring here" errnos.
func (e *SetupError) Is(target error) bool {
	if target != ErrUnavailable {
		return false
	}
	switch e.Errno {
	case unix.ENOSYS, unix.EPERM, unix.ENOMEM, unix.EINVAL:
		return true
	}
	return false
}

func setupReason(errno syscall.Errno, stage string) string {
	switch errno {
	case unix.ENOSYS:
		return "kernel too old or built without io_uring (CONFIG_IO_URING)"
	case unix.EPERM:
		return "io_uring disabled by sysctl kernel.io_uring_disabled or blocked by seccomp (e.g. Docker's default profile)"
	case unix.ENOMEM:
		return "out of locked memory: RLIMIT_MEMLOCK too low for the ring (" + stage + ")"
	case unix.EINVAL:
		return "kernel rejects these setup flags or entry counts (unsupported feature)"
	case unix.EMFILE, unix.ENFILE:
		return "out of file descriptors"
	}
	return stage + " failed"
}

// Ring is one io_uring instance with its SQ, CQ and SQE array mapped into
// the process. A Ring is not safe for concurrent use: one goroutine (with
// SINGLE_ISSUER/DEFER_TASKRUN: one locked OS thread) owns it.
type Ring struct {
	fd         int
	enterFd    int    // fd or registered ring index passed to io_uring_enter
	enterFlags uint32 // EnterRegisteredRing when enterFd is an index
	regTid     int    // thread that registered the ring fd (registrations are per task)
	flags      uint32
	features   uint32
	// cqAlwaysEnter: completions can only be reaped through io_uring_enter
	// even when no SQ flag says so (IOPOLL, or DEFER_TASKRUN on a kernel
	// that refused TASKRUN_FLAG).
	cqAlwaysEnter bool

	// SQ ring: pointers into mmap'd memory written by the kernel and/or us.
	sqHead    *uint32 // kernel advances as it consumes SQEs
	sqTail    *uint32 // we publish; kernel reads
	sqFlags   *uint32 // kernel-written IORING_SQ_* bits
	sqDropped *uint32
	sqMask    uint32
	sqEntries uint32
	sqes      []SQE  // mmap'd SQE array
	sqeHead   uint32 // local: first SQE not yet published
	sqeTail   uint32 // local: next SQE to hand out

	// CQ ring.
	cqHead     *uint32 // we advance after consuming
	cqTail     *uint32 // kernel publishes
	cqOverflow *uint32
	cqMask     uint32
	cqEntries  uint32
	cqes       []CQE // mmap'd CQE array

	sqRingMem []byte
	cqRingMem []byte // nil when FEAT_SINGLE_MMAP (shares sqRingMem)
	sqesMem   []byte

	// Wait arguments for EXT_ARG enters. They live here, in the heap-allocated
	// Ring, so the kernel never reads them from a goroutine stack and taking
	// their address does not make anything escape per call.
	arg geteventsArg
	ts  unix.Timespec

	closed bool
}

// Setup creates a ring with at least entries SQ entries.
func Setup(entries uint32, opts ...Option) (*Ring, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	r, err := setup(entries, &cfg)
	if err != nil && cfg.flags&SetupDeferTaskrun != 0 && cfg.flags&SetupTaskrunFlag != 0 {
		var se *SetupError
		if errors.As(err, &se) && se.Errno == unix.EINVAL {
			// Older kernels refuse TASKRUN_FLAG together with DEFER_TASKRUN.
			cfg.flags &^= SetupTaskrunFlag
			r, err = setup(entries, &cfg)
		}
	}
	return r, err
}

func setup(entries uint32, cfg *config) (*Ring, error) {
	p := new(params)
	p.flags = cfg.flags
	p.cqEntries = cfg.cqSize
	p.sqThreadIdle = cfg.sqIdle
	// unsafe: p is a heap object kept alive by this frame for the duration
	// of the syscall; the kernel fills it in before returning.
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if errno != 0 {
		return nil, &SetupError{Errno: errno, Reason: setupReason(errno, "io_uring_setup")}
	}
	r := &Ring{fd: int(fd), enterFd: int(fd), flags: p.flags, features: p.features}
	r.cqAlwaysEnter = p.flags&SetupIOPoll != 0 ||
		(p.flags&SetupDeferTaskrun != 0 && p.flags&SetupTaskrunFlag == 0)
	if err := r.mmapRings(p); err != nil {
		r.unmap()
		unix.Close(r.fd)
		errno, _ := err.(syscall.Errno)
		return nil, &SetupError{Errno: errno, Reason: setupReason(errno, "mmap of rings")}
	}
	return r, nil
}

func (r *Ring) mmapRings(p *params) error {
	sqSize := int(p.sqOff.array) + int(p.sqEntries)*4
	cqSize := int(p.cqOff.cqes) + int(p.cqEntries)*int(unsafe.Sizeof(CQE{}))
	single := p.features&FeatSingleMmap != 0
	if single {
		sqSize = max(sqSize, cqSize)
		cqSize = sqSize
	}
	const prot = unix.PROT_READ | unix.PROT_WRITE
	const mflags = unix.MAP_SHARED | unix.MAP_POPULATE
	var err error
	r.sqRingMem, err = unix.Mmap(r.fd, offSQRing, sqSize, prot, mflags)
	if err != nil {
		return err
	}
	cqMem := r.sqRingMem
	if !single {
		r.cqRingMem, err = unix.Mmap(r.fd, offCQRing, cqSize, prot, mflags)
		if err != nil {
			return err
		}
		cqMem = r.cqRingMem
	}
	r.sqesMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(SQE{})), prot, mflags)
	if err != nil {
		return err
	}

	// unsafe: every pointer below is base+offset into a MAP_SHARED region
	// whose size we computed from the kernel's own offsets, so it is in
	// bounds and 4-byte aligned (the kernel lays these out as __u32). The
	// regions are not Go heap memory: the GC ignores them and they stay
	// mapped until Close, which clears these fields first.
	sq := unsafe.Pointer(unsafe.SliceData(r.sqRingMem))
	r.sqHead = (*uint32)(unsafe.Add(sq, p.sqOff.head))
	r.sqTail = (*uint32)(unsafe.Add(sq, p.sqOff.tail))
	r.sqFlags = (*uint32)(unsafe.Add(sq, p.sqOff.flags))
	r.sqDropped = (*uint32)(unsafe.Add(sq, p.sqOff.dropped))
	r.sqMask = *(*uint32)(unsafe.Add(sq, p.sqOff.ringMask))
	r.sqEntries = *(*uint32)(unsafe.Add(sq, p.sqOff.ringEntries))
	if p.flags&SetupNoSQArray == 0 {
		// Identity map the indirection array once; after that only the
		// tail moves (the SQE at index i is always slot i).
		arr := unsafe.Slice((*uint32)(unsafe.Add(sq, p.sqOff.array)), r.sqEntries)
		for i := range arr {
			arr[i] = uint32(i)
		}
	}
	// unsafe: sqesMem is exactly sqEntries*64 bytes, page aligned.
	r.sqes = unsafe.Slice((*SQE)(unsafe.Pointer(unsafe.SliceData(r.sqesMem))), r.sqEntries)

	cq := unsafe.Pointer(unsafe.SliceData(cqMem))
	r.cqHead = (*uint32)(unsafe.Add(cq, p.cqOff.head))
	r.cqTail = (*uint32)(unsafe.Add(cq, p.cqOff.tail))
	r.cqOverflow = (*uint32)(unsafe.Add(cq, p.cqOff.overflow))
	r.cqMask = *(*uint32)(unsafe.Add(cq, p.cqOff.ringMask))
	r.cqEntries = *(*uint32)(unsafe.Add(cq, p.cqOff.ringEntries))
	// unsafe: cqes starts at cq_off.cqes (16-byte aligned by the kernel)
	// and the mapping covers cqEntries CQEs past it.
	r.cqes = unsafe.Slice((*CQE)(unsafe.Add(cq, p.cqOff.cqes)), r.cqEntries)
	return nil
}

func (r *Ring) unmap() {
	r.sqHead, r.sqTail, r.sqFlags, r.sqDropped = nil, nil, nil, nil
	r.cqHead, r.cqTail, r.cqOverflow = nil, nil, nil
	r.sqes, r.cqes = nil, nil
	if r.sqesMem != nil {
		unix.Munmap(r.sqesMem)
		r.sqesMem = nil
	}
	if r.cqRingMem != nil {
		unix.Munmap(r.cqRingMem)
		r.cqRingMem = nil
	}
	if r.sqRingMem != nil {
		unix.Munmap(r.sqRingMem)
		r.sqRingMem = nil
	}
}

// Close unregisters the ring fd (if registered from this thread), unmaps
// the rings and closes the fd. Close is idempotent.
//
// The kernel cancels requests still in flight, but it does so
// asynchronously after the fd is closed. Memory those requests point at must
// therefore stay valid until they are gone: cancel them (PrepCancelAny with
// AsyncCancelAll) and reap their CQEs before Close, or keep the buffers
// alive/mapped for the life of the process.
func (r *Ring) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.enterFlags&EnterRegisteredRing != 0 {
		// Registered ring fds belong to the registering task; unregistering
		// from another thread would hit that thread's table, so only do it
		// from the owner. Otherwise the reference drops when that thread exits.
		if unix.Gettid() == r.regTid {
			up := rsrcUpdate{offset: uint32(r.enterFd)}
			// unsafe: the argument struct holds no stack addresses; see register.
			r.register(unregisterRingFds, unsafe.Pointer(&up), 1)
		}
		r.enterFlags &^= EnterRegisteredRing
		r.enterFd = r.fd
	}
	r.unmap()
	return unix.Close(r.fd)
}

// Fd returns the ring's file descriptor.
func (r *Ring) Fd() int { return r.fd }

// Features returns the IORING_FEAT_* bits the kernel reported.
func (r *Ring) Features() uint32 { return r.features }

// Flags returns the setup flags in effect.
func (r *Ring) Flags() uint32 { return r.flags }

// SQEntries returns the SQ size.
func (r *Ring) SQEntries() uint32 { return r.sqEntries }

// CQEntries returns the CQ size.
func (r *Ring) CQEntries() uint32 { return r.cqEntries }
