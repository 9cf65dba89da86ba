package sock

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Linux's side of the package: raw system calls that skip the runtime's
// bookkeeping, accept4, SO_PEERNAME and the sockaddr forms io_uring reads.

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

// AcceptPeer is Accept with the peer's address as a Peer: an IP peer's
// costs no allocation, where Accept's *net.TCPAddr is 64 bytes of garbage
// per connection for a caller that keeps the address compactly.
func AcceptPeer(fd int) (int, Peer, error) {
	var raw unix.RawSockaddrAny
	n := uint32(unsafe.Sizeof(raw))
	// Sound: as in Accept.
	nfd, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(fd), uintptr(unsafe.Pointer(&raw)),
		uintptr(unsafe.Pointer(&n)), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	if e != 0 {
		return -1, Peer{}, e
	}
	switch raw.Addr.Family {
	case unix.AF_INET:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(&raw)) // the family says which form the kernel wrote
		return int(nfd), Peer{IP: netip.AddrPortFrom(netip.AddrFrom4(p.Addr), htons(p.Port))}, nil
	case unix.AF_INET6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(&raw)) // as above
		return int(nfd), Peer{IP: netip.AddrPortFrom(netip.AddrFrom16(p.Addr), htons(p.Port))}, nil
	}
	return int(nfd), Peer{Addr: rawToNet(&raw, n)}, nil
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
		return NewTCPAddr(p.Addr[:], int(htons(p.Port)))
	case unix.AF_INET6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(raw)) // as above
		return NewTCPAddr(p.Addr[:], int(htons(p.Port)))
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

// socket creates a close-on-exec socket, non-blocking if asked, in one
// system call.
func socket(family, typ int, nonblock bool) (int, error) {
	typ |= unix.SOCK_CLOEXEC
	if nonblock {
		typ |= unix.SOCK_NONBLOCK
	}
	return unix.Socket(family, typ, 0)
}

// autobind binds a Unix datagram socket to a unique abstract address the
// kernel picks (an empty name), so that a peer can answer it.
func autobind(fd int) error { return unix.Bind(fd, &unix.SockaddrUnix{}) }

// Family returns the address family of socket fd (SO_DOMAIN).
func Family(fd int) (int, error) {
	f, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return 0, os.NewSyscallError("getsockopt SO_DOMAIN", err)
	}
	return f, nil
}
