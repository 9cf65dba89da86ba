//go:build linux

// Package sock creates and configures the sockets the reactor drives:
// listening sockets (optionally SO_REUSEPORT), outbound sockets, and the
// conversions between net.Addr and the kernel's sockaddr forms.
package sock

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNetwork reports a network name other than tcp, tcp4, tcp6 or unix.
// Its text starts with "veloq: " like every error package net returns,
// which exports it as ErrUnsupportedNetwork.
var ErrNetwork = errors.New("veloq: unsupported network (tcp, tcp4, tcp6 and unix are)")

// Addr is a resolved address in the kernel's sockaddr form.
type Addr struct {
	Family int
	SA     unix.Sockaddr
	Net    net.Addr
}

// Resolve turns network and address into a socket address. Host names are
// resolved with the Go resolver, which may block; callers on a reactor
// should pass numeric addresses.
func Resolve(network, address string) (Addr, error) {
	switch network {
	case "unix":
		if len(address) >= len(unix.RawSockaddrUnix{}.Path) {
			return Addr{}, fmt.Errorf("veloq: unix socket path too long: %q", address)
		}
		sa := &unix.SockaddrUnix{Name: address}
		return Addr{Family: unix.AF_UNIX, SA: sa, Net: &net.UnixAddr{Name: address, Net: "unix"}}, nil
	case "tcp", "tcp4", "tcp6":
	default:
		return Addr{}, fmt.Errorf("%w: %q", ErrNetwork, network)
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return Addr{}, fmt.Errorf("veloq: %w", err)
	}
	ip, ipErr := netip.ParseAddr(host) // fails for "" and for host names
	port, portErr := strconv.ParseUint(portStr, 10, 16)
	if (ipErr != nil && host != "") || portErr != nil {
		// A host or service name: one resolver call answers both.
		ta, err := net.ResolveTCPAddr(network, address)
		if err != nil {
			return Addr{}, fmt.Errorf("veloq: %w", err)
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
	if ip.Is4() && network != "tcp6" {
		return Addr{Family: unix.AF_INET, SA: &unix.SockaddrInet4{Port: int(port), Addr: ip.As4()},
			Net: net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(port)))}, nil
	}
	if network == "tcp4" {
		return Addr{}, fmt.Errorf("veloq: %s is not an IPv4 address", host)
	}
	return Addr{Family: unix.AF_INET6, SA: &unix.SockaddrInet6{Port: int(port), Addr: ip.As16()},
		Net: net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(port)))}, nil
}

// Listen creates a non-blocking, close-on-exec listening socket bound to a.
// With reusePort every socket bound to the same address gets a share of the
// incoming connections (SO_REUSEPORT), which is how each loop gets its own
// accept queue.
func Listen(a Addr, reusePort bool, backlog int) (int, net.Addr, error) {
	fd, err := unix.Socket(a.Family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
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
	fd, err := unix.Socket(a.Family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
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
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	return fd, nil
}

// Raw converts sa into the raw form io_uring's connect reads. The result
// is heap memory the caller keeps referenced until the operation completes.
func Raw(sa unix.Sockaddr) (*unix.RawSockaddrAny, uint32, error) {
	raw := new(unix.RawSockaddrAny)
	switch s := sa.(type) {
	case *unix.SockaddrInet4:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(raw)) // RawSockaddrAny is large enough for every family
		p.Family = unix.AF_INET
		p.Port = htons(uint16(s.Port))
		p.Addr = s.Addr
		return raw, unix.SizeofSockaddrInet4, nil
	case *unix.SockaddrInet6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(raw)) // as above
		p.Family = unix.AF_INET6
		p.Port = htons(uint16(s.Port))
		p.Scope_id = s.ZoneId
		p.Addr = s.Addr
		return raw, unix.SizeofSockaddrInet6, nil
	case *unix.SockaddrUnix:
		p := (*unix.RawSockaddrUnix)(unsafe.Pointer(raw)) // as above
		p.Family = unix.AF_UNIX
		if len(s.Name) >= len(p.Path) {
			return nil, 0, fmt.Errorf("veloq: unix socket path too long: %q", s.Name)
		}
		for i := 0; i < len(s.Name); i++ {
			p.Path[i] = int8(s.Name[i])
		}
		return raw, uint32(2 + len(s.Name) + 1), nil
	}
	return nil, 0, fmt.Errorf("%w: sockaddr %T", ErrNetwork, sa)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// LocalAddr returns the address fd is bound to.
func LocalAddr(fd int) (net.Addr, error) {
	var raw unix.RawSockaddrAny
	n := uint32(unsafe.Sizeof(raw))
	// Sound: as in Accept.
	_, _, e := unix.RawSyscall(unix.SYS_GETSOCKNAME, uintptr(fd), uintptr(unsafe.Pointer(&raw)), uintptr(unsafe.Pointer(&n)))
	if e != 0 {
		return nil, os.NewSyscallError("getsockname", e)
	}
	return rawToNet(&raw, n), nil
}

// Accept takes a connection from the listening socket fd with accept4(2),
// non-blocking and close-on-exec, and returns it with the peer's address.
// Errors are the bare errno (unix.EAGAIN when the backlog is empty). Raw:
// the listening socket is non-blocking, so the call never waits.
func Accept(fd int) (int, net.Addr, error) {
	var raw unix.RawSockaddrAny
	n := uint32(unsafe.Sizeof(raw))
	// Sound: the kernel writes at most n bytes (raw's size) into raw, and
	// the pointers stay referenced for the whole call because they are
	// converted in the call expression.
	nfd, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(fd), uintptr(unsafe.Pointer(&raw)),
		uintptr(unsafe.Pointer(&n)), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	if e != 0 {
		return -1, nil, e
	}
	return int(nfd), rawToNet(&raw, n), nil
}

// PeerAddr returns the address of fd's peer. Once a reset has arrived,
// getpeername fails with ENOTCONN although the kernel still records the
// peer; SO_PEERNAME reads it without that state check (the way accept
// reports it), so an accepted connection that was reset before the loop
// looked at it still has its address.
func PeerAddr(fd int) (net.Addr, error) {
	var raw unix.RawSockaddrAny
	n := uint32(unsafe.Sizeof(raw))
	// Sound: as in Accept.
	_, _, e := unix.RawSyscall(unix.SYS_GETPEERNAME, uintptr(fd), uintptr(unsafe.Pointer(&raw)), uintptr(unsafe.Pointer(&n)))
	if e == 0 {
		return rawToNet(&raw, n), nil
	}
	if e != unix.ENOTCONN {
		return nil, os.NewSyscallError("getpeername", e)
	}
	// SO_PEERNAME refuses (EINVAL) a buffer longer than the address, so
	// ask for an IPv6 address first, then an IPv4 one.
	for _, size := range []uintptr{unsafe.Sizeof(unix.RawSockaddrInet6{}), unsafe.Sizeof(unix.RawSockaddrInet4{})} {
		n := uint32(size)
		// Sound: the kernel writes at most n bytes (no more than raw's
		// size) into raw, which stays referenced for the whole call.
		_, _, e = unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERNAME,
			uintptr(unsafe.Pointer(&raw)), uintptr(unsafe.Pointer(&n)), 0)
		if e != unix.EINVAL {
			break
		}
	}
	if e != 0 {
		return nil, os.NewSyscallError("getsockopt SO_PEERNAME", e)
	}
	if a := rawToNet(&raw, uint32(unsafe.Sizeof(raw))); a != nil {
		return a, nil
	}
	return nil, os.NewSyscallError("getpeername", unix.ENOTCONN)
}

// Connected reports whether fd's connect has completed: getpeername(2)
// succeeds once the handshake is done, and fails with ENOTCONN while it
// is in progress or after it failed (unlike PeerAddr, which reads the
// peer of a connection in any state).
func Connected(fd int) bool {
	var raw unix.RawSockaddrAny
	n := uint32(unsafe.Sizeof(raw))
	// Sound: as in Accept.
	_, _, e := unix.RawSyscall(unix.SYS_GETPEERNAME, uintptr(fd), uintptr(unsafe.Pointer(&raw)), uintptr(unsafe.Pointer(&n)))
	return e == 0
}

// rawToNet converts an address of n bytes the kernel wrote into a
// net.Addr: a TCP address in one allocation, a Unix one (an abstract name
// shown with a leading '@', and an unnamed socket as "@", as the standard
// library does), or nil for other families.
func rawToNet(raw *unix.RawSockaddrAny, n uint32) net.Addr {
	switch raw.Addr.Family {
	case unix.AF_INET:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(raw)) // the family says which form the kernel wrote
		return newTCPAddr(p.Addr[:], int(htons(p.Port)))
	case unix.AF_INET6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(raw)) // as above
		return newTCPAddr(p.Addr[:], int(htons(p.Port)))
	case unix.AF_UNIX:
		p := (*unix.RawSockaddrUnix)(unsafe.Pointer(raw)) // as above
		path := p.Path[:min(max(int(n)-2, 0), len(p.Path))]
		abstract := len(path) > 0 && path[0] == 0
		if !abstract {
			for i, c := range path {
				if c == 0 {
					path = path[:i]
					break
				}
			}
		}
		name := make([]byte, len(path))
		for i, c := range path {
			name[i] = byte(c)
		}
		switch {
		case abstract:
			name[0] = '@'
		case len(name) == 0:
			// An unnamed socket (a client that never bound): the standard
			// library reads its all-zero path as an abstract one and shows
			// "@", which net/http passes on as Request.RemoteAddr. Show
			// the same, not an empty string that logs as nothing.
			name = []byte{'@'}
		}
		return &net.UnixAddr{Name: string(name), Net: "unix"}
	}
	return nil
}

// tcpAddr is a net.TCPAddr with room for its IP, so that an address is one
// allocation instead of two.
type tcpAddr struct {
	a  net.TCPAddr
	ip [16]byte
}

func newTCPAddr(ip []byte, port int) *net.TCPAddr {
	t := new(tcpAddr)
	n := copy(t.ip[:], ip)
	t.a = net.TCPAddr{IP: t.ip[:n:n], Port: port}
	return &t.a
}

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
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, d); err != nil {
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

// RawRead is read(2) on a non-blocking descriptor without the runtime's
// system-call bookkeeping (entersyscall/exitsyscall), which costs about as
// much as a small read itself. Only for descriptors that never block: a raw
// call holds its P and cannot be preempted until it returns.
func RawRead(fd int, p []byte) (int, error) {
	// Sound: the pointer is converted to uintptr in the call expression,
	// the array is heap memory the caller keeps (KeepAlive below), and heap
	// objects do not move.
	ptr := unsafe.Pointer(unsafe.SliceData(p))
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	runtime.KeepAlive(p)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// RawWritev is writev(2) for non-blocking descriptors; see RawRead. The
// iovecs point into heap memory the caller keeps referenced until the
// call returns.
func RawWritev(fd int, iov []unix.Iovec) (int, error) {
	ptr := unsafe.Pointer(unsafe.SliceData(iov)) // as in RawRead
	n, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(ptr), uintptr(len(iov)))
	runtime.KeepAlive(iov)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// RawWrite is write(2) for non-blocking descriptors; see RawRead.
func RawWrite(fd int, p []byte) (int, error) {
	ptr := unsafe.Pointer(unsafe.SliceData(p)) // as in RawRead
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	runtime.KeepAlive(p)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
