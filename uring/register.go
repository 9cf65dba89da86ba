//go:build linux

package uring

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// register calls io_uring_register(fd, op, arg, nr), retrying EINTR.
//
// arg must point to a struct holding no addresses of goroutine-stack
// memory: a stack move between here and the syscall would not rewrite a
// raw address stored in an integer field. (The struct itself may be on the
// stack: it is passed as an unsafe.Pointer argument, which the runtime
// keeps valid, and converted to uintptr in the Syscall6 call expression.)
func (r *Ring) register(op uintptr, arg unsafe.Pointer, nr uintptr) (int, error) {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), op, uintptr(arg), nr, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		return int(n), nil
	}
}

// RegisterRingFd registers the ring fd with the calling task so
// io_uring_enter skips the fd lookup (IORING_REGISTER_RING_FDS).
//
// The registration belongs to the calling OS thread: call it only from a
// goroutine that holds runtime.LockOSThread and keeps using the ring from
// that thread. Close unregisters it when called from the same thread.
func (r *Ring) RegisterRingFd() error {
	if r.closed {
		return ErrClosed
	}
	if r.enterFlags&EnterRegisteredRing != 0 {
		return unix.EEXIST
	}
	up := rsrcUpdate{offset: ^uint32(0), data: uint64(r.fd)}
	// unsafe: the argument struct holds no stack addresses; see register.
	n, err := r.register(registerRingFds, unsafe.Pointer(&up), 1)
	if err != nil {
		return err
	}
	if n != 1 {
		return unix.EINVAL
	}
	r.enterFd = int(up.offset)
	r.enterFlags |= EnterRegisteredRing
	r.regTid = unix.Gettid()
	return nil
}

// Probe lists the opcodes this kernel supports.
type Probe struct {
	lastOp uint8
	opsLen uint8
	_      uint16
	_      [3]uint32
	ops    [256]probeOp
}

// Probe asks the kernel which opcodes it supports (IORING_REGISTER_PROBE).
func (r *Ring) Probe() (*Probe, error) {
	if r.closed {
		return nil, ErrClosed
	}
	p := new(Probe)
	// unsafe: the argument struct holds no stack addresses; see register.
	if _, err := r.register(registerProbe, unsafe.Pointer(p), uintptr(len(p.ops))); err != nil {
		return nil, err
	}
	return p, nil
}

// Supported reports whether op is supported.
func (p *Probe) Supported(op uint8) bool {
	if p == nil || op >= p.opsLen {
		return false
	}
	return p.ops[op].flags&probeOpSupported != 0
}

// LastOp returns the highest opcode the kernel knows.
func (p *Probe) LastOp() uint8 { return p.lastOp }

// RegisterFilesSparse registers an empty (all -1) fixed-file table of n slots.
func (r *Ring) RegisterFilesSparse(n uint32) error {
	if r.closed {
		return ErrClosed
	}
	reg := rsrcRegister{nr: n, flags: rsrcRegisterSparse}
	// unsafe: the argument struct holds no stack addresses; see register.
	_, err := r.register(registerFiles2, unsafe.Pointer(&reg), unsafe.Sizeof(reg))
	return err
}

// RegisterFilesUpdate installs fds into fixed-file slots off, off+1, ...
// (-1 clears a slot).
func (r *Ring) RegisterFilesUpdate(off uint32, fds []int32) error {
	if r.closed {
		return ErrClosed
	}
	if len(fds) == 0 {
		return nil
	}
	done := 0
	for done < len(fds) {
		// unsafe: up.data holds the address of fds' array, which may be on
		// the caller's stack. Between taking it and the syscall there is no
		// function call that could grow (and move) the stack: unix.Syscall6
		// is nosplit all the way into the kernel, and stacks are never
		// shrunk while in a syscall. KeepAlive keeps fds reachable.
		rest := fds[done:]
		up := rsrcUpdate{offset: off + uint32(done), data: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(rest))))}
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerFilesUpdate,
			uintptr(unsafe.Pointer(&up)), uintptr(len(rest)), 0, 0)
		runtime.KeepAlive(fds)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		if n == 0 {
			return unix.EIO
		}
		done += int(n)
	}
	return nil
}

// UnregisterFiles drops the fixed-file table.
func (r *Ring) UnregisterFiles() error {
	if r.closed {
		return ErrClosed
	}
	_, err := r.register(unregisterFiles, nil, 0)
	return err
}

// BufRing is a provided-buffer ring (IORING_REGISTER_PBUF_RING). Its entry
// array lives in anonymous mmap'd memory, never in the Go heap; the buffers
// it points at are supplied by the caller and must stay mapped/referenced
// until FreeBufRing. Only the ring's owner goroutine may use it.
type BufRing struct {
	mem   []byte
	bufs  []bufEntry
	tailW *uint32 // 32-bit word holding bufs[0].bid and the shared tail
	tail  uint16  // local tail (entries published up to here)
	mask  uint16  // entries-1
	bgid  uint16
}

// SetupBufRing maps and registers a buffer ring of entries (a power of two,
// at most 32768) for buffer group bgid.
func (r *Ring) SetupBufRing(entries uint32, bgid uint16) (*BufRing, error) {
	return r.setupBufRing(entries, bgid, 0)
}

// SetupBufRingInc is SetupBufRing for a ring whose buffers are consumed
// incrementally (IOU_PBUF_RING_INC, Linux 6.12+): a receive takes only
// the bytes it needs from the buffer at the ring's head, and the next
// goes on where it stopped. A completion's CQEFBufMore says the kernel
// keeps the rest of that buffer; without it the buffer is used up and
// the application's again. Kernels without the flag refuse it (EINVAL).
func (r *Ring) SetupBufRingInc(entries uint32, bgid uint16) (*BufRing, error) {
	return r.setupBufRing(entries, bgid, pbufRingInc)
}

func (r *Ring) setupBufRing(entries uint32, bgid, flags uint16) (*BufRing, error) {
	if r.closed {
		return nil, ErrClosed
	}
	if entries == 0 || entries > 1<<15 || entries&(entries-1) != 0 {
		return nil, errors.New("uring: SetupBufRing: entries must be a power of two in [1, 32768]")
	}
	size := int(entries) * int(unsafe.Sizeof(bufEntry{}))
	page := unix.Getpagesize()
	size = (size + page - 1) &^ (page - 1)
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANONYMOUS|unix.MAP_PRIVATE|unix.MAP_POPULATE)
	if err != nil {
		return nil, err
	}
	// unsafe: mem is page-aligned, non-Go memory of at least entries*16
	// bytes; it stays mapped until FreeBufRing.
	base := unsafe.Pointer(unsafe.SliceData(mem))
	reg := bufReg{ringAddr: uint64(uintptr(base)), ringEntries: entries, bgid: bgid, flags: flags}
	// unsafe: the argument struct holds no stack addresses; see register.
	if _, err := r.register(registerPbufRing, unsafe.Pointer(&reg), 1); err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	br := &BufRing{
		mem:   mem,
		bufs:  unsafe.Slice((*bufEntry)(base), entries),
		tailW: (*uint32)(unsafe.Add(base, 12)), // bid(12..13) + tail(14..15) of entry 0, 4-byte aligned
		mask:  uint16(entries - 1),
		bgid:  bgid,
	}
	return br, nil
}

// FreeBufRing unregisters the buffer group and unmaps the ring.
func (r *Ring) FreeBufRing(br *BufRing) error {
	if br == nil || br.mem == nil {
		return nil
	}
	var err error
	if !r.closed {
		reg := bufReg{bgid: br.bgid}
		// unsafe: the argument struct holds no stack addresses; see register.
		_, err = r.register(unregisterPbufRing, unsafe.Pointer(&reg), 1)
	}
	br.bufs, br.tailW = nil, nil
	if uerr := unix.Munmap(br.mem); err == nil {
		err = uerr
	}
	br.mem = nil
	return err
}

// Add writes buf as buffer bid into the slot offset entries past the
// current tail. Nothing is visible to the kernel until Advance.
func (br *BufRing) Add(buf []byte, bid uint16, offset int) {
	e := &br.bufs[(br.tail+uint16(offset))&br.mask]
	e.addr = bufAddr(buf)
	e.len = uint32(len(buf))
	e.bid = bid
	// e.resv is deliberately untouched: for slot 0 it is the shared tail.
}

// Advance publishes n added entries to the kernel.
func (br *BufRing) Advance(n int) {
	br.tail += uint16(n)
	// Go has no 16-bit atomic store, so publish the tail with a 32-bit
	// sequentially consistent store of the aligned word that also holds
	// slot 0's bid. Only this goroutine writes that bid, so rewriting it with
	// its current value is harmless; the store orders all entry writes
	// before the kernel's load-acquire of the tail. The word is assembled
	// in its memory image (bid, then tail) so it is right on either endian.
	var w [4]byte
	binary.NativeEndian.PutUint16(w[0:2], br.bufs[0].bid)
	binary.NativeEndian.PutUint16(w[2:4], br.tail)
	atomic.StoreUint32(br.tailW, binary.NativeEndian.Uint32(w[:]))
}

// Recycle gives one buffer back to the kernel: Add(buf, bid, 0) + Advance(1).
func (br *BufRing) Recycle(buf []byte, bid uint16) {
	br.Add(buf, bid, 0)
	br.Advance(1)
}

// BGID returns the buffer group id.
func (br *BufRing) BGID() uint16 { return br.bgid }

// Entries returns the ring size.
func (br *BufRing) Entries() uint32 { return uint32(br.mask) + 1 }
