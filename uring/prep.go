//go:build linux

package uring

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Every Prep* method fills an SQE that GetSQE already zeroed. Pointers are
// stored as integers in the SQE: the caller keeps the pointed-to memory
// referenced (and off the goroutine stack) until the CQE arrives; see doc.go.

// bufAddr returns the address of b's backing array (0 for a nil slice).
// unsafe: taking the address never dereferences it; the kernel uses it
// only while the caller keeps b alive, per the package's memory rules.
func bufAddr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

func (s *SQE) prepRW(op uint8, fd int, addr uint64, n uint32, off uint64) {
	s.Opcode = op
	s.Fd = int32(fd)
	s.Off = off
	s.Addr = addr
	s.Len = n
}

// SetUserData sets user_data, echoed in the CQE. Never store a Go pointer.
func (s *SQE) SetUserData(u uint64) { s.UData = u }

// SetFlags ORs IOSQE_* flags into the SQE.
func (s *SQE) SetFlags(f uint8) { s.Flags |= f }

// SetBufGroup sets buf_group for IOSQE_BUFFER_SELECT.
func (s *SQE) SetBufGroup(g uint16) { s.BufIndex = g }

// PrepNop prepares IORING_OP_NOP.
func (s *SQE) PrepNop() { s.prepRW(OpNop, -1, 0, 0, 0) }

// PrepAccept prepares an accept on listening socket fd (peer address not
// collected; flags are accept4 flags such as SOCK_NONBLOCK|SOCK_CLOEXEC).
func (s *SQE) PrepAccept(fd int, flags int) {
	s.prepRW(OpAccept, fd, 0, 0, 0)
	s.OpFlags = uint32(flags)
}

// PrepMultishotAccept is PrepAccept that keeps posting one CQE per
// connection while CQE.More() is true.
func (s *SQE) PrepMultishotAccept(fd int, flags int) {
	s.PrepAccept(fd, flags)
	s.Ioprio |= AcceptMultishot
}

// PrepConnect prepares a connect; sa must stay alive until the CQE.
func (s *SQE) PrepConnect(fd int, sa *unix.RawSockaddrAny, salen uint32) {
	// unsafe: the address is only stored; see the package memory rules.
	s.prepRW(OpConnect, fd, uint64(uintptr(unsafe.Pointer(sa))), 0, uint64(salen))
}

// PrepRecv prepares a recv into buf (or, with buf nil, SQEBufferSelect and
// SetBufGroup, into a provided buffer).
func (s *SQE) PrepRecv(fd int, buf []byte, flags int) {
	s.prepRW(OpRecv, fd, bufAddr(buf), uint32(len(buf)), 0)
	s.OpFlags = uint32(flags)
}

// PrepRecvMultishot is PrepRecv that stays armed (IORING_RECV_MULTISHOT).
// It needs buffer selection: pass buf nil, then SetFlags(SQEBufferSelect)
// and SetBufGroup(bgid). Re-arm when a CQE arrives without F_MORE.
func (s *SQE) PrepRecvMultishot(fd int, buf []byte, flags int) {
	s.PrepRecv(fd, buf, flags)
	s.Ioprio |= RecvMultishot
}

// PrepSend prepares a send of buf.
func (s *SQE) PrepSend(fd int, buf []byte, flags int) {
	s.prepRW(OpSend, fd, bufAddr(buf), uint32(len(buf)), 0)
	s.OpFlags = uint32(flags)
}

// PrepSendZC prepares a zero-copy send; expect a second CQE with CQEFNotif
// before buf may be reused. zcFlags go in ioprio (IORING_RECVSEND_*/SEND_ZC_*).
func (s *SQE) PrepSendZC(fd int, buf []byte, flags int, zcFlags uint16) {
	s.prepRW(OpSendZC, fd, bufAddr(buf), uint32(len(buf)), 0)
	s.OpFlags = uint32(flags)
	s.Ioprio = zcFlags
}

// PrepSendmsg prepares a sendmsg; msg and everything it points to must
// stay alive until the CQE.
func (s *SQE) PrepSendmsg(fd int, msg *unix.Msghdr, flags int) {
	// unsafe: address only stored; see the package memory rules.
	s.prepRW(OpSendmsg, fd, uint64(uintptr(unsafe.Pointer(msg))), 1, 0)
	s.OpFlags = uint32(flags)
}

// PrepRecvmsg prepares a recvmsg.
func (s *SQE) PrepRecvmsg(fd int, msg *unix.Msghdr, flags int) {
	// unsafe: address only stored; see the package memory rules.
	s.prepRW(OpRecvmsg, fd, uint64(uintptr(unsafe.Pointer(msg))), 1, 0)
	s.OpFlags = uint32(flags)
}

// PrepRead prepares a read at off (^uint64(0) = current file position).
func (s *SQE) PrepRead(fd int, buf []byte, off uint64) {
	s.prepRW(OpRead, fd, bufAddr(buf), uint32(len(buf)), off)
}

// PrepWrite prepares a write at off (^uint64(0) = current file position).
func (s *SQE) PrepWrite(fd int, buf []byte, off uint64) {
	s.prepRW(OpWrite, fd, bufAddr(buf), uint32(len(buf)), off)
}

// iovAddr returns the address of the iovec array.
// unsafe: address only stored; see the package memory rules.
func iovAddr(iovs []unix.Iovec) uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(iovs))))
}

// PrepReadv prepares a readv.
func (s *SQE) PrepReadv(fd int, iovs []unix.Iovec, off uint64) {
	s.prepRW(OpReadv, fd, iovAddr(iovs), uint32(len(iovs)), off)
}

// PrepWritev prepares a writev (off 0 for sockets).
func (s *SQE) PrepWritev(fd int, iovs []unix.Iovec, off uint64) {
	s.prepRW(OpWritev, fd, iovAddr(iovs), uint32(len(iovs)), off)
}

// PrepClose prepares a close of fd.
func (s *SQE) PrepClose(fd int) { s.prepRW(OpClose, fd, 0, 0, 0) }

// PrepShutdown prepares shutdown(fd, how).
func (s *SQE) PrepShutdown(fd int, how int) { s.prepRW(OpShutdown, fd, 0, uint32(how), 0) }

// PrepSocket prepares socket(domain, typ, proto); flags must be 0 today.
func (s *SQE) PrepSocket(domain, typ, proto int, flags uint32) {
	s.prepRW(OpSocket, domain, 0, uint32(proto), uint64(typ))
	s.OpFlags = flags
}

// PrepTimeout prepares a timeout that fires after ts, or once count other
// completions happened (count 0: time only). Completes with -ETIME when it
// fires. ts must stay alive until the CQE.
func (s *SQE) PrepTimeout(ts *unix.Timespec, count uint32, flags uint32) {
	// unsafe: address only stored; see the package memory rules.
	s.prepRW(OpTimeout, -1, uint64(uintptr(unsafe.Pointer(ts))), 1, uint64(count))
	s.OpFlags = flags
}

// PrepLinkTimeout prepares a timeout for the previous SQE, which must carry
// SQEIOLink. When it fires the linked request is cancelled (-ECANCELED).
func (s *SQE) PrepLinkTimeout(ts *unix.Timespec, flags uint32) {
	// unsafe: address only stored; see the package memory rules.
	s.prepRW(OpLinkTimeout, -1, uint64(uintptr(unsafe.Pointer(ts))), 1, 0)
	s.OpFlags = flags
}

// PrepTimeoutRemove removes the timeout whose user_data is userData.
func (s *SQE) PrepTimeoutRemove(userData uint64, flags uint32) {
	s.prepRW(OpTimeoutRemove, -1, userData, 0, 0)
	s.OpFlags = flags
}

// PrepCancel cancels the request with user_data userData (AsyncCancelAll
// in flags: every such request).
func (s *SQE) PrepCancel(userData uint64, flags uint32) {
	s.prepRW(OpAsyncCancel, -1, userData, 0, 0)
	s.OpFlags = flags
}

// PrepCancelFd cancels requests on fd (flags may add AsyncCancelAll or
// AsyncCancelFdFixed).
func (s *SQE) PrepCancelFd(fd int, flags uint32) {
	s.prepRW(OpAsyncCancel, fd, 0, 0, 0)
	s.OpFlags = flags | AsyncCancelFd
}

// PrepCancelAny cancels every in-flight request of the ring.
func (s *SQE) PrepCancelAny() {
	s.prepRW(OpAsyncCancel, -1, 0, 0, 0)
	s.OpFlags = AsyncCancelAny
}

// PrepPollAdd prepares a one-shot poll for mask (POLLIN, ...).
func (s *SQE) PrepPollAdd(fd int, mask uint32) {
	s.prepRW(OpPollAdd, fd, 0, 0, 0)
	s.OpFlags = mask // poll32_events; little- and big-endian kernels both read it as a __u32
}

// PrepPollMultishot prepares a poll that stays armed (CQE.More()).
func (s *SQE) PrepPollMultishot(fd int, mask uint32) {
	s.PrepPollAdd(fd, mask)
	s.Len = PollAddMulti
}

// PrepPollRemove removes the poll request with user_data userData.
func (s *SQE) PrepPollRemove(userData uint64) {
	s.prepRW(OpPollRemove, -1, userData, 0, 0)
}

// PrepMsgRing posts a CQE {user_data: data, res: res} on the ring whose fd
// is fd (IORING_MSG_DATA).
func (s *SQE) PrepMsgRing(fd int, res uint32, data uint64, flags uint32) {
	s.prepRW(OpMsgRing, fd, MsgData, res, data)
	s.OpFlags = flags
}

// PrepSplice prepares splice(fdIn, offIn, fdOut, offOut, n, flags); an
// offset of -1 means "no offset" (pipes / current position).
func (s *SQE) PrepSplice(fdIn int, offIn int64, fdOut int, offOut int64, n uint32, flags uint32) {
	s.prepRW(OpSplice, fdOut, uint64(offIn), n, uint64(offOut))
	s.FileIndex = uint32(int32(fdIn))
	s.OpFlags = flags
}
