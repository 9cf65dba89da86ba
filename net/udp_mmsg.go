package net

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The system-call layer of datagram sockets: recvmmsg and sendmmsg over
// arrays of mmsghdr kept per loop (receive) and per socket (send), and the
// conversions between netip.AddrPort and the kernel's sockaddr bytes.

// sockaddrLen is the room kept for one peer address: a sockaddr_un (110
// bytes) holds any of the three families.
const sockaddrLen = unix.SizeofSockaddrUnix

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
func mmsg(recv bool, fd int, hdrs []unix.Mmsghdr) (int, unix.Errno) {
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

// putSockaddr writes ap into b as the sockaddr a socket of family expects
// (an IPv4 peer of an IPv6 socket as a v4-mapped address) and returns its
// length, or 0 when the family cannot reach ap.
func putSockaddr(b *[sockaddrLen]byte, family int, ap netip.AddrPort) uint32 {
	clear(b[:unix.SizeofSockaddrInet6])
	ip := ap.Addr()
	switch {
	case family == unix.AF_INET && ip.Unmap().Is4():
		binary.NativeEndian.PutUint16(b[0:], unix.AF_INET)
		binary.BigEndian.PutUint16(b[2:], ap.Port())
		a4 := ip.Unmap().As4()
		copy(b[4:8], a4[:])
		return unix.SizeofSockaddrInet4
	case family == unix.AF_INET6:
		binary.NativeEndian.PutUint16(b[0:], unix.AF_INET6)
		binary.BigEndian.PutUint16(b[2:], ap.Port())
		a16 := ip.As16() // an IPv4 address comes out v4-mapped
		copy(b[8:24], a16[:])
		return unix.SizeofSockaddrInet6
	}
	return 0
}

// getSockaddr reads the peer address the kernel wrote into b (n bytes),
// with a v4-mapped address unmapped so that it compares equal to the
// IPv4 address the peer has. The zero AddrPort means none, or a Unix
// socket's name.
func getSockaddr(b []byte, n uint32) netip.AddrPort {
	if n < 2 {
		return netip.AddrPort{}
	}
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		if n >= unix.SizeofSockaddrInet4 {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:]))
		}
	case unix.AF_INET6:
		if n >= unix.SizeofSockaddrInet6 {
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), binary.BigEndian.Uint16(b[2:]))
		}
	}
	return netip.AddrPort{}
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
