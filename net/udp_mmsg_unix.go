//go:build unix && !linux

package net

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Outside Linux there is no recvmmsg or sendmmsg (macOS has neither, and
// x/sys/unix wraps neither for the BSDs), no UDP_SEGMENT (GSO) and no
// UDP_GRO: a batch is one recvmsg or sendmsg per message, and every
// datagram is sent and received on its own. The headers keep Linux's
// mmsghdr shape so the loop's batch code is the same; the peer addresses
// in them are in udp_mmsg.go's layout, converted here, so the kernel never
// reads those bytes.

// mmsghdr is one message of a batch: the header and the bytes it moved.
type mmsghdr struct {
	Hdr unix.Msghdr
	Len uint32
}

// mmsg sends or receives hdrs one message at a time, non-blocking. Like
// recvmmsg, it returns how many messages it moved, and the error only if
// it moved none.
func mmsg(recv bool, fd int, hdrs []mmsghdr) (int, unix.Errno) {
	for i := range hdrs {
		h := &hdrs[i].Hdr
		// Sound: the loop set Iov and Name to heap buffers of the lengths
		// recorded beside them, which the batch keeps alive.
		p := unsafe.Slice(h.Iov.Base, h.Iov.Len)
		name := (*[sockaddrLen]byte)(unsafe.Pointer(h.Name))
		var n int
		var err error
		if recv {
			var flags int
			var from unix.Sockaddr
			n, _, flags, from, err = unix.Recvmsg(fd, p, nil, unix.MSG_DONTWAIT)
			if err == nil {
				h.Flags, h.Controllen = int32(flags), 0
				h.Namelen = putFrom(name, from)
			}
		} else {
			n, err = unix.SendmsgN(fd, p, nil, toSockaddr(name[:h.Namelen]), unix.MSG_DONTWAIT)
		}
		if err != nil {
			if i > 0 {
				return i, 0
			}
			e, _ := err.(unix.Errno)
			return 0, e
		}
		hdrs[i].Len = uint32(n)
	}
	return len(hdrs), 0
}

// putFrom records sa in udp_mmsg.go's layout and returns its length (0
// for a Unix peer, which has no AddrPort).
func putFrom(b *[sockaddrLen]byte, sa unix.Sockaddr) uint32 {
	switch s := sa.(type) {
	case *unix.SockaddrInet4:
		return putSockaddr(b, unix.AF_INET, netip.AddrPortFrom(netip.AddrFrom4(s.Addr), uint16(s.Port)))
	case *unix.SockaddrInet6:
		return putSockaddr(b, unix.AF_INET6, netip.AddrPortFrom(netip.AddrFrom16(s.Addr), uint16(s.Port)))
	}
	return 0
}

// toSockaddr reads a peer address put with putSockaddr; nil (a connected
// socket's own peer) for none.
func toSockaddr(b []byte) unix.Sockaddr {
	ap := getSockaddr(b, uint32(len(b)))
	switch {
	case !ap.IsValid():
		return nil
	case ap.Addr().Is4() && len(b) == unix.SizeofSockaddrInet4:
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}
