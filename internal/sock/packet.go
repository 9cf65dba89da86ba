//go:build unix

package sock

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// ResolvePacket is Resolve for datagram networks: "udp", "udp4" and "udp6"
// (Net is a *net.UDPAddr) and "unixgram" (a path, or "@name" for Linux's
// abstract namespace; Net is a *net.UnixAddr).
func ResolvePacket(network, address string) (Addr, error) {
	switch network {
	case "udp", "udp4", "udp6":
	case "unixgram":
		return Addr{Family: unix.AF_UNIX, SA: &unix.SockaddrUnix{Name: address},
			Net: &net.UnixAddr{Name: address, Net: "unixgram"}}, nil
	default:
		return Addr{}, fmt.Errorf("%w: %q", ErrNetwork, network)
	}
	// The stream resolver does the same parsing; only the names differ.
	a, err := Resolve(strings.Replace(network, "udp", "tcp", 1), address)
	if err != nil {
		return Addr{}, err
	}
	a.Net = net.UDPAddrFromAddrPort(a.Net.(*net.TCPAddr).AddrPort())
	return a, nil
}

// ListenPacket creates a non-blocking, close-on-exec datagram socket bound
// to a (SO_REUSEPORT with reusePort, so that each loop has a socket of its
// own on the same port; without it a taken port fails with EADDRINUSE), with SO_RCVBUF and SO_SNDBUF raised to rcvBuf and
// sndBuf when those are positive. It returns the bound address.
func ListenPacket(a Addr, reusePort bool, rcvBuf, sndBuf int) (int, netip.AddrPort, error) {
	fd, err := packetSocket(a.Family, rcvBuf, sndBuf)
	if err != nil {
		return -1, netip.AddrPort{}, err
	}
	fail := func(op string, err error) (int, netip.AddrPort, error) {
		unix.Close(fd)
		return -1, netip.AddrPort{}, os.NewSyscallError(op, err)
	}
	if a.Family == unix.AF_UNIX {
		if err := unix.Bind(fd, a.SA); err != nil {
			return fail("bind", err)
		}
		return fd, netip.AddrPort{}, nil // a path has no AddrPort
	}
	// No SO_REUSEADDR: UDP has no TIME_WAIT for it to help with, and on
	// Linux it lets two UDP sockets bind one port outright, the later one
	// taking the datagrams.
	if reusePort {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			return fail("setsockopt SO_REUSEPORT", err)
		}
	}
	if a.Family == unix.AF_INET6 {
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0) // "[::]" serves both families, as in Go's net
	}
	if err := unix.Bind(fd, a.SA); err != nil {
		return fail("bind", err)
	}
	local, err := SockAddrPort(fd, false)
	if err != nil {
		unix.Close(fd)
		return -1, netip.AddrPort{}, err
	}
	return fd, local, nil
}

// DialPacket creates a datagram socket connected to a, so that it sends
// to a by default, receives only from a, and is told of ICMP errors
// (ECONNREFUSED). It returns the local address (none for a Unix socket,
// which is bound to an abstract name the kernel picks, so that the peer
// can answer).
func DialPacket(a Addr, rcvBuf, sndBuf int) (int, netip.AddrPort, error) {
	fd, err := packetSocket(a.Family, rcvBuf, sndBuf)
	if err != nil {
		return -1, netip.AddrPort{}, err
	}
	if a.Family == unix.AF_UNIX {
		// Linux: an empty name is autobind, a unique abstract address.
		if err := autobind(fd); err != nil {
			unix.Close(fd)
			return -1, netip.AddrPort{}, os.NewSyscallError("bind", err)
		}
		if err := unix.Connect(fd, a.SA); err != nil {
			unix.Close(fd)
			return -1, netip.AddrPort{}, os.NewSyscallError("connect", err)
		}
		return fd, netip.AddrPort{}, nil
	}
	if err := unix.Connect(fd, a.SA); err != nil {
		unix.Close(fd)
		return -1, netip.AddrPort{}, os.NewSyscallError("connect", err)
	}
	local, err := SockAddrPort(fd, false)
	if err != nil {
		unix.Close(fd)
		return -1, netip.AddrPort{}, err
	}
	return fd, local, nil
}

func packetSocket(family, rcvBuf, sndBuf int) (int, error) {
	// SOCK_DGRAM is a datagram socket in every family (UDP for the IP ones).
	fd, err := socket(family, unix.SOCK_DGRAM, true)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	// The sizes are wishes: the kernel caps them at net.core.[rw]mem_max,
	// and a failure leaves its default, which still works.
	if rcvBuf > 0 {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf)
	}
	if sndBuf > 0 {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, sndBuf)
	}
	return fd, nil
}

// SockAddrPort returns fd's local address (peer false) or its connected
// peer's (peer true) as an IP address and port.
func SockAddrPort(fd int, peer bool) (netip.AddrPort, error) {
	var sa unix.Sockaddr
	var err error
	if peer {
		sa, err = unix.Getpeername(fd)
	} else {
		sa, err = unix.Getsockname(fd)
	}
	if err != nil {
		return netip.AddrPort{}, os.NewSyscallError("getsockname", err)
	}
	switch s := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(s.Addr), uint16(s.Port)), nil
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(s.Addr).Unmap(), uint16(s.Port)), nil
	}
	return netip.AddrPort{}, fmt.Errorf("%w: sockaddr %T", ErrNetwork, sa)
}

// ProbeBindPacket is ProbeBind for datagram sockets: it fails with
// EADDRINUSE when any socket holds a's UDP port.
func ProbeBindPacket(a Addr) error {
	switch sa := a.SA.(type) {
	case *unix.SockaddrInet4:
		if sa.Port == 0 {
			return nil
		}
	case *unix.SockaddrInet6:
		if sa.Port == 0 {
			return nil
		}
	default:
		return nil // a path: bind refuses a taken one (and a probe would create the file)
	}
	fd, err := socket(a.Family, unix.SOCK_DGRAM, false)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	if a.Family == unix.AF_INET6 {
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0)
	}
	if err := unix.Bind(fd, a.SA); err != nil {
		return os.NewSyscallError("bind", err)
	}
	return nil
}
