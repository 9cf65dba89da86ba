package sock

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// ErrNetwork reports a network name other than tcp, tcp4, tcp6 or unix.
// Its text starts with "veloq: " like every error package net returns,
// which exports it as ErrUnsupportedNetwork.
var ErrNetwork = errors.New("veloq: unsupported network (tcp, tcp4, tcp6 and unix are)")

// ErrNoDropCounter: the kernel does not report a socket's drop counter
// (no SO_MEMINFO before Linux 4.12, or one without SK_MEMINFO_DROPS).
var ErrNoDropCounter = errors.New("sock: the kernel reports no socket drop counter")

// resolveTCP parses a "tcp", "tcp4" or "tcp6" address into an IP and a
// port, and says whether it is an IPv4 socket's (v4). Host names are
// resolved with the Go resolver, which may block; callers on a reactor
// should pass numeric addresses. Every system's Resolve starts here.
func resolveTCP(network, address string) (ap netip.AddrPort, v4 bool, err error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return ap, false, fmt.Errorf("veloq: %w", err)
	}
	ip, ipErr := netip.ParseAddr(host) // fails for "" and for host names
	port, portErr := strconv.ParseUint(portStr, 10, 16)
	if (ipErr != nil && host != "") || portErr != nil {
		// A host or service name: one resolver call answers both.
		ta, err := net.ResolveTCPAddr(network, address)
		if err != nil {
			return ap, false, fmt.Errorf("veloq: %w", err)
		}
		ip, _ = netip.AddrFromSlice(ta.IP)
		port = uint64(ta.Port)
	}
	if !ip.IsValid() { // no host: the unspecified address
		ip = netip.IPv4Unspecified()
		if network == "tcp6" {
			ip = netip.IPv6Unspecified()
		}
	}
	ip = ip.Unmap()
	ap = netip.AddrPortFrom(ip, uint16(port))
	if ip.Is4() && network != "tcp6" {
		return ap, true, nil
	}
	if network == "tcp4" {
		return netip.AddrPort{}, false, fmt.Errorf("veloq: %s is not an IPv4 address", host)
	}
	return ap, false, nil
}

// Peer is an accepted connection's peer address: IP, when it has an IP
// address and port, which costs no allocation, else Addr (a Unix
// socket's), or neither when unknown.
type Peer struct {
	IP   netip.AddrPort
	Addr net.Addr
}

// tcpAddr is a net.TCPAddr with room for its IP, so that an address is one
// allocation instead of two.
type tcpAddr struct {
	a  net.TCPAddr
	ip [16]byte
}

// NewTCPAddr returns a *net.TCPAddr of ip (copied) and port in one
// allocation.
func NewTCPAddr(ip []byte, port int) *net.TCPAddr {
	t := new(tcpAddr)
	n := copy(t.ip[:], ip)
	t.a = net.TCPAddr{IP: t.ip[:n:n], Port: port}
	return &t.a
}

// checkUnixPath refuses a Unix socket path that does not fit a
// sockaddr_un of max path bytes (the terminating NUL included).
func checkUnixPath(address string, max int) error {
	if len(address) >= max {
		return fmt.Errorf("veloq: unix socket path too long: %q", address)
	}
	return nil
}
