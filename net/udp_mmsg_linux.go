package net

import (
	"encoding/binary"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is one message of a recvmmsg or sendmmsg batch.
type mmsghdr = unix.Mmsghdr

// gsoCmsgSpace is the control room for one UDP_SEGMENT message (a cmsghdr
// and a uint16, padded); groCmsgSpace for one UDP_GRO message (an int).
var (
	gsoCmsgSpace = unix.CmsgSpace(2)
	groCmsgSpace = unix.CmsgSpace(4)
)

// mmsg calls recvmmsg (recv) or sendmmsg on fd with hdrs. It is a raw
// system call, without the runtime's entersyscall/exitsyscall: the socket
// is non-blocking (and MSG_DONTWAIT is passed), so the call never sleeps.
// x/sys/unix has no wrapper for either call.
func mmsg(recv bool, fd int, hdrs []mmsghdr) (int, unix.Errno) {
	trap := uintptr(unix.SYS_SENDMMSG)
	if recv {
		trap = unix.SYS_RECVMMSG
	}
	// Sound: the array is heap memory (the loop's or the socket's batch)
	// kept alive below, the pointers it holds (names, iovecs, control
	// buffers, payloads) are typed Go pointers into heap memory that the
	// same batch keeps alive, and Go's heap objects do not move.
	ptr := unsafe.Pointer(unsafe.SliceData(hdrs))
	n, _, e := unix.RawSyscall6(trap, uintptr(fd), uintptr(ptr), uintptr(len(hdrs)), unix.MSG_DONTWAIT, 0, 0)
	runtime.KeepAlive(hdrs)
	return int(n), e
}

// putSegmentCmsg writes the UDP_SEGMENT control message for segments of
// size bytes into b (gsoCmsgSpace long).
func putSegmentCmsg(b []byte, size uint16) {
	clear(b)
	h := unix.Cmsghdr{Level: unix.SOL_UDP, Type: unix.UDP_SEGMENT}
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint64(b[0:], h.Len)
	binary.NativeEndian.PutUint32(b[8:], uint32(h.Level))
	binary.NativeEndian.PutUint32(b[12:], uint32(h.Type))
	binary.NativeEndian.PutUint16(b[unix.CmsgLen(0):], size)
}

// groSegment returns the segment size of a coalesced receive from its
// control messages (b, the n bytes the kernel wrote), or 0 when the
// datagram was not coalesced.
func groSegment(b []byte, n int) int {
	b = b[:min(n, len(b))]
	hdr := unix.CmsgLen(0)
	for len(b) >= hdr {
		l := int(binary.NativeEndian.Uint64(b[0:]))
		level := int32(binary.NativeEndian.Uint32(b[8:]))
		typ := int32(binary.NativeEndian.Uint32(b[12:]))
		if l < hdr || l > len(b) {
			return 0
		}
		if level == unix.SOL_UDP && typ == unix.UDP_GRO && l >= hdr+4 {
			return int(binary.NativeEndian.Uint32(b[hdr:]))
		}
		next := unix.CmsgSpace(l - hdr)
		if next > len(b) {
			return 0
		}
		b = b[next:]
	}
	return 0
}

// kernelOffloads reports whether the kernel offers UDP_SEGMENT (GSO, Linux
// 4.18) and UDP_GRO (Linux 5.0) on fd; gro true also switches GRO on.
// Both are probed per socket: a kernel without them refuses the option.
func kernelOffloads(fd int, wantGRO bool) (gso, gro bool) {
	_, err := unix.GetsockoptInt(fd, unix.SOL_UDP, unix.UDP_SEGMENT)
	gso = err == nil
	if wantGRO {
		gro = unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_GRO, 1) == nil
	}
	return gso, gro
}
