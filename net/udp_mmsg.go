package net

import (
	"encoding/binary"
	"net/netip"
	"syscall"
)

// The system-call layer of datagram sockets: recvmmsg and sendmmsg over
// arrays of mmsghdr kept per loop (receive) and per socket (send), and the
// conversions between netip.AddrPort and the kernel's sockaddr bytes
// (Linux's layout: outside Linux only udp_mmsg_unix.go reads them).

// sockaddrLen is the room kept for one peer address: a sockaddr_un (110
// bytes) holds any of the three families.
const sockaddrLen = sizeofSockaddrUnix

// putSockaddr writes ap into b as the sockaddr a socket of family expects
// (an IPv4 peer of an IPv6 socket as a v4-mapped address) and returns its
// length, or 0 when the family cannot reach ap.
func putSockaddr(b *[sockaddrLen]byte, family int, ap netip.AddrPort) uint32 {
	clear(b[:sizeofSockaddrInet6])
	ip := ap.Addr()
	switch {
	case family == syscall.AF_INET && ip.Unmap().Is4():
		binary.NativeEndian.PutUint16(b[0:], syscall.AF_INET)
		binary.BigEndian.PutUint16(b[2:], ap.Port())
		a4 := ip.Unmap().As4()
		copy(b[4:8], a4[:])
		return sizeofSockaddrInet4
	case family == syscall.AF_INET6:
		binary.NativeEndian.PutUint16(b[0:], syscall.AF_INET6)
		binary.BigEndian.PutUint16(b[2:], ap.Port())
		a16 := ip.As16() // an IPv4 address comes out v4-mapped
		copy(b[8:24], a16[:])
		return sizeofSockaddrInet6
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
	case syscall.AF_INET:
		if n >= sizeofSockaddrInet4 {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:]))
		}
	case syscall.AF_INET6:
		if n >= sizeofSockaddrInet6 {
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), binary.BigEndian.Uint16(b[2:]))
		}
	}
	return netip.AddrPort{}
}
