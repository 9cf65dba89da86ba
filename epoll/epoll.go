//go:build linux

package epoll

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Event flags, usable in the events mask of [Poller.Add] and [Poller.Mod]
// and reported in [Event.Events]. Err and Hup are always reported by the
// kernel whether or not they were requested.
const (
	In            uint32 = unix.EPOLLIN      // readable (or a pending accept)
	Out           uint32 = unix.EPOLLOUT     // writable
	RDHup         uint32 = unix.EPOLLRDHUP   // peer shut down its writing half
	Pri           uint32 = unix.EPOLLPRI     // exceptional condition (TCP urgent data)
	Err           uint32 = unix.EPOLLERR     // error condition; always reported
	Hup           uint32 = unix.EPOLLHUP     // hang up; always reported
	EdgeTriggered uint32 = unix.EPOLLET      // report transitions only
	OneShot       uint32 = unix.EPOLLONESHOT // disable after one event until Mod
)

// ReservedData is the token under which the internal wakeup eventfd is
// registered. Add and Mod reject it with [ErrReserved].
const ReservedData uint64 = math.MaxUint64

var (
	// ErrClosed is returned by every method called after [Poller.Close].
	ErrClosed = errors.New("epoll: poller is closed")
	// ErrReserved is returned when a caller tries to register the
	// [ReservedData] token or the poller's internal eventfd.
	ErrReserved = errors.New("epoll: token or fd is reserved for the wakeup eventfd")
)

// Event is one readiness notification returned by [Poller.Wait].
type Event struct {
	Events uint32 // bit set of In, Out, RDHup, Err, Hup, ...
	Data   uint64 // the token given to Add or Mod for this fd
}

// Poller is an epoll instance plus a wakeup eventfd. The zero value is not
// usable; create one with [New].
type Poller struct {
	epfd int // owner only
	efd  int // eventfd; read by Wake under mu, closed by Close under mu

	buf   []unix.EpollEvent // owner only; reused by Wait
	drain [8]byte           // owner only; eventfd read target
	one   [8]byte           // immutable after New: the value 1, native endian

	// pending is true from the moment a Wake decides to write the eventfd
	// until the owner has drained it in Wait; Wakes that find it set skip
	// the write system call. See Wake and Wait for the ordering argument.
	pending atomic.Bool

	mu     sync.RWMutex // held for reading while Wake uses efd; Close takes it for writing
	closed atomic.Bool  // set by Close under mu
}

// New creates an epoll instance (epoll_create1 with EPOLL_CLOEXEC) and a
// non-blocking eventfd registered in it for [Poller.Wake].
func New() (*Poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll: epoll_create1: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("epoll: eventfd: %w", err)
	}
	// Level-triggered on purpose: until Wait drains the counter the eventfd
	// stays ready, so a wakeup can never be lost between two Waits.
	ev := unix.EpollEvent{Events: unix.EPOLLIN}
	setData(&ev, ReservedData)
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, efd, &ev); err != nil {
		unix.Close(efd)
		unix.Close(epfd)
		return nil, fmt.Errorf("epoll: register eventfd: %w", err)
	}
	p := &Poller{epfd: epfd, efd: efd}
	// eventfd(2) reads and writes 8-byte integers in host byte order.
	binary.NativeEndian.PutUint64(p.one[:], 1)
	return p, nil
}

// setData stores a 64-bit token in the epoll_data union of ev.
//
// The kernel's struct epoll_event is {u32 events; union epoll_data data;}
// where the union is 8 bytes (void *ptr, int fd, u32, u64). x/sys/unix
// models the union as the two consecutive int32 fields Fd and Pad; on
// architectures where the kernel struct is not packed (arm64, riscv64, ...)
// an extra leading padding field precedes them, but Fd and Pad are always the
// union's 8 bytes, Fd first. The kernel treats those bytes as one native-
// endian u64, so we split the token through its native-endian byte image:
// Fd receives bytes 0-3 and Pad bytes 4-7. This is correct on little- and
// big-endian machines alike and needs no unsafe pointer arithmetic (which on
// amd64 would also be a misaligned 8-byte access, the struct being packed).
func setData(ev *unix.EpollEvent, d uint64) {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], d)
	ev.Fd = int32(binary.NativeEndian.Uint32(b[0:4]))
	ev.Pad = int32(binary.NativeEndian.Uint32(b[4:8]))
}

// getData is the inverse of setData.
func getData(ev *unix.EpollEvent) uint64 {
	var b [8]byte
	binary.NativeEndian.PutUint32(b[0:4], uint32(ev.Fd))
	binary.NativeEndian.PutUint32(b[4:8], uint32(ev.Pad))
	return binary.NativeEndian.Uint64(b[:])
}

// Add registers fd for the given events; data is returned with each event.
func (p *Poller) Add(fd int, events uint32, data uint64) error {
	return p.ctl("add", unix.EPOLL_CTL_ADD, fd, events, data)
}

// Mod changes the events and token of an already registered fd. It is also
// how a OneShot registration is re-armed.
func (p *Poller) Mod(fd int, events uint32, data uint64) error {
	return p.ctl("mod", unix.EPOLL_CTL_MOD, fd, events, data)
}

// Del removes fd from the interest list. Closing an fd removes it
// implicitly only once every duplicate of it is closed, so callers should
// Del before Close when the fd may have been dup'ed.
func (p *Poller) Del(fd int) error {
	// Since Linux 2.6.9 EPOLL_CTL_DEL ignores the event argument.
	return p.ctl("del", unix.EPOLL_CTL_DEL, fd, 0, 0)
}

func (p *Poller) ctl(name string, op, fd int, events uint32, data uint64) error {
	if p.epfd < 0 {
		return fmt.Errorf("epoll: %s fd %d: %w", name, fd, ErrClosed)
	}
	if data == ReservedData || fd == p.efd {
		return fmt.Errorf("epoll: %s fd %d: %w", name, fd, ErrReserved)
	}
	ev := unix.EpollEvent{Events: events}
	setData(&ev, data)
	if err := unix.EpollCtl(p.epfd, op, fd, &ev); err != nil {
		return fmt.Errorf("epoll: %s fd %d: %w", name, fd, err)
	}
	return nil
}

// Wait blocks until at least one registered fd is ready, the poller is
// woken, the timeout expires or a signal interrupts the wait, and stores up
// to len(events) readiness events in events. It returns how many it stored.
//
// A negative timeout blocks indefinitely and zero polls without blocking.
// Positive timeouts are rounded up to whole milliseconds (the resolution of
// epoll_wait) so that a short timeout never degenerates into busy polling.
// Interruption by a signal (EINTR) is reported as (0, nil), as is a wakeup:
// the wakeup eventfd is drained here and never appears in events.
//
// events must not be empty. After the first call with a given length, Wait
// does not allocate.
func (p *Poller) Wait(events []Event, timeout time.Duration) (int, error) {
	if p.epfd < 0 {
		return 0, fmt.Errorf("epoll: wait: %w", ErrClosed)
	}
	if len(events) == 0 {
		return 0, fmt.Errorf("epoll: wait: events slice is empty: %w", unix.EINVAL)
	}
	if cap(p.buf) < len(events) {
		p.buf = make([]unix.EpollEvent, len(events))
	}
	buf := p.buf[:len(events)]

	// unix.EpollWait issues epoll_pwait through Syscall6, which calls
	// entersyscall/exitsyscall: the P is released while we are blocked.
	n, err := unix.EpollWait(p.epfd, buf, msec(timeout))
	if err != nil {
		if err == unix.EINTR {
			return 0, nil
		}
		return 0, fmt.Errorf("epoll: wait: %w", err)
	}
	k := 0
	for i := range n {
		ev := &buf[i]
		d := getData(ev)
		if d == ReservedData {
			p.drainWake()
			continue
		}
		events[k] = Event{Events: ev.Events, Data: d}
		k++
	}
	return k, nil
}

// drainWake resets the eventfd counter, then clears pending.
//
// Order matters. Every Wake that found pending set did so before the Store
// below, so the caller of Wait, which runs after it, observes whatever that
// Wake's goroutine published beforehand. Every Wake that runs after the
// Store finds pending clear and writes the eventfd again, so the next Wait
// returns. Clearing before reading would instead let a Wake set pending,
// have its write consumed by this read, and leave pending set with a zero
// counter: later Wakes would skip their writes and be lost.
func (p *Poller) drainWake() {
	// A read returns and zeroes the counter. EAGAIN means it was already
	// zero, which is harmless; nothing else can fail on a valid eventfd.
	_, _ = unix.Read(p.efd, p.drain[:])
	p.pending.Store(false)
}

// msec converts a Wait timeout to epoll_wait's int milliseconds.
func msec(d time.Duration) int {
	switch {
	case d < 0:
		return -1
	case d == 0:
		return 0
	}
	ms := d / time.Millisecond
	if d%time.Millisecond != 0 {
		ms++ // round up without risking overflow near MaxInt64
	}
	if ms > math.MaxInt32 {
		ms = math.MaxInt32
	}
	return int(ms)
}

// Wake makes a concurrent or the next [Poller.Wait] return. It is safe to
// call from any goroutine. Wakes coalesce: while a wakeup is pending and not
// yet consumed by Wait, further Wakes return without a system call. After
// Close, Wake returns ErrClosed.
func (p *Poller) Wake() error {
	if p.pending.Load() && !p.closed.Load() {
		return nil // cheap path, touches no fd
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed.Load() {
		return fmt.Errorf("epoll: wake: %w", ErrClosed)
	}
	if !p.pending.CompareAndSwap(false, true) {
		return nil
	}
	// Holding the read lock keeps Close from closing efd under us, so the
	// write cannot land on a recycled descriptor number.
	_, err := unix.Write(p.efd, p.one[:])
	if err != nil && err != unix.EAGAIN {
		// The wakeup was not delivered; let the next Wake retry.
		p.pending.Store(false)
		return fmt.Errorf("epoll: wake: %w", err)
	}
	// EAGAIN: the counter is saturated, so Wait is already due to wake.
	return nil
}

// Close releases the epoll instance and the eventfd. It is idempotent. It
// must not run concurrently with Add, Mod, Del or Wait (a Wait blocked in
// the kernel would not notice the close); it may run concurrently with Wake.
func (p *Poller) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return nil
	}
	p.closed.Store(true)
	var errs []error
	if err := unix.Close(p.efd); err != nil {
		errs = append(errs, fmt.Errorf("epoll: close eventfd: %w", err))
	}
	if err := unix.Close(p.epfd); err != nil {
		errs = append(errs, fmt.Errorf("epoll: close epoll fd: %w", err))
	}
	p.efd, p.epfd = -1, -1
	p.buf = nil
	return errors.Join(errs...)
}
