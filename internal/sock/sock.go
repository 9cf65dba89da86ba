//go:build unix

// Package sock creates and configures the sockets the reactor drives:
// listening sockets (optionally SO_REUSEPORT), outbound sockets, and the
// conversions between net.Addr and the kernel's sockaddr forms.
package sock

import (
	"fmt"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Addr is a resolved address in the kernel's sockaddr form.
type Addr struct {
	Family int
	SA     unix.Sockaddr
	Net    net.Addr
}

// Resolve turns network and address into a socket address (host names
// as resolveTCP says).
func Resolve(network, address string) (Addr, error) {
	switch network {
	case "unix":
		if err := checkUnixPath(address, len(unix.RawSockaddrUnix{}.Path)); err != nil {
			return Addr{}, err
		}
		sa := &unix.SockaddrUnix{Name: address}
		return Addr{Family: unix.AF_UNIX, SA: sa, Net: &net.UnixAddr{Name: address, Net: "unix"}}, nil
	case "tcp", "tcp4", "tcp6":
	default:
		return Addr{}, fmt.Errorf("%w: %q", ErrNetwork, network)
	}
	ap, v4, err := resolveTCP(network, address)
	if err != nil {
		return Addr{}, err
	}
	if v4 {
		return Addr{Family: unix.AF_INET, SA: &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()},
			Net: net.TCPAddrFromAddrPort(ap)}, nil
	}
	return Addr{Family: unix.AF_INET6, SA: &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()},
		Net: net.TCPAddrFromAddrPort(ap)}, nil
}

// Listen creates a non-blocking, close-on-exec listening socket bound to a.
// With reusePort every socket bound to the same address gets a share of the
// incoming connections (SO_REUSEPORT), which is how each loop gets its own
// accept queue.
func Listen(a Addr, reusePort bool, backlog int) (int, net.Addr, error) {
	fd, err := socket(a.Family, unix.SOCK_STREAM, true)
	if err != nil {
		return -1, nil, os.NewSyscallError("socket", err)
	}
	fail := func(op string, err error) (int, net.Addr, error) {
		unix.Close(fd)
		return -1, nil, os.NewSyscallError(op, err)
	}
	if a.Family != unix.AF_UNIX {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
			return fail("setsockopt SO_REUSEADDR", err)
		}
		if reusePort {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
				return fail("setsockopt SO_REUSEPORT", err)
			}
		}
		if a.Family == unix.AF_INET6 {
			// Behave like Go's net: "[::]" listens on both families.
			_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0)
		}
	}
	if err := unix.Bind(fd, a.SA); err != nil {
		return fail("bind", err)
	}
	if backlog <= 0 {
		backlog = unix.SOMAXCONN
	}
	if err := unix.Listen(fd, backlog); err != nil {
		return fail("listen", err)
	}
	local, err := LocalAddr(fd)
	if err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	return fd, local, nil
}

// ProbeBind checks that no socket holds a's port: it binds a throwaway
// socket with SO_REUSEADDR (so connections in TIME_WAIT do not count) and
// without SO_REUSEPORT, which fails with EADDRINUSE if anything listens
// there, SO_REUSEPORT or not. A listener that will set SO_REUSEPORT calls
// it first, so that it does not silently share the port with another
// server. Port 0 needs no probe: the kernel picks a free port.
func ProbeBind(a Addr) error {
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
		return nil // unix sockets: the path is the address, bind refuses a taken one
	}
	fd, err := socket(a.Family, unix.SOCK_STREAM, false)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return os.NewSyscallError("setsockopt SO_REUSEADDR", err)
	}
	if a.Family == unix.AF_INET6 {
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0)
	}
	if err := unix.Bind(fd, a.SA); err != nil {
		return os.NewSyscallError("bind", err)
	}
	return nil
}

// Socket creates a non-blocking, close-on-exec stream socket for family.
func Socket(family int) (int, error) {
	fd, err := socket(family, unix.SOCK_STREAM, true)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	return fd, nil
}

// NoDelayByDefault: a new socket has Nagle's algorithm on, so only
// turning it off needs a call.
const NoDelayByDefault = false

// SetNoDelay sets TCP_NODELAY.
func SetNoDelay(fd int, on bool) error {
	return os.NewSyscallError("setsockopt TCP_NODELAY", unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, b2i(on)))
}

// SetKeepAlive enables TCP keep-alive probes after idle d (d <= 0 disables).
func SetKeepAlive(fd int, d int) error {
	if d <= 0 {
		return os.NewSyscallError("setsockopt SO_KEEPALIVE", unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 0))
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1); err != nil {
		return os.NewSyscallError("setsockopt SO_KEEPALIVE", err)
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, KeepIdle, d); err != nil {
		return os.NewSyscallError("setsockopt TCP_KEEPIDLE", err)
	}
	return os.NewSyscallError("setsockopt TCP_KEEPINTVL", unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, d))
}

// SoError returns the pending socket error (SO_ERROR), nil if none.
func SoError(fd int) error {
	v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return os.NewSyscallError("getsockopt SO_ERROR", err)
	}
	if v != 0 {
		return syscall.Errno(v)
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// LingerZero sets SO_LINGER to zero, so that closing fd resets the
// connection (RST) instead of ending it (FIN): a proxy's client then sees
// the stream broke, not a clean end.
func LingerZero(fd int) error {
	return os.NewSyscallError("setsockopt SO_LINGER", unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}))
}
