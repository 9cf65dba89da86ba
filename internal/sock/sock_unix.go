//go:build unix && !linux

package sock

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The other unix systems (macOS, the BSDs) through x/sys/unix's portable
// calls. They serve the portable backend, which is not a fast path, so
// the raw calls Linux uses to skip the runtime's bookkeeping are not
// needed here; neither accept4 nor SOCK_NONBLOCK exists on macOS, so
// those flags are set with fcntl under syscall.ForkLock, which keeps a
// concurrent fork from inheriting the descriptor in between.

func socket(family, typ int, nonblock bool) (int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fd, err := unix.Socket(family, typ, 0)
	if err != nil {
		return -1, err
	}
	return fd, setFlags(fd, nonblock)
}

func setFlags(fd int, nonblock bool) error {
	unix.CloseOnExec(fd)
	if !nonblock {
		return nil
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return err
	}
	return nil
}

// autobind: only Linux has the abstract namespace; a Unix datagram client
// elsewhere stays unbound, so it can send but a peer cannot answer it.
func autobind(int) error { return nil }

// Accept takes a connection from the listening socket fd, non-blocking
// and close-on-exec, and returns it with the peer's address. Errors are
// the bare errno (unix.EAGAIN when the backlog is empty).
func Accept(fd int) (int, net.Addr, error) {
	syscall.ForkLock.RLock()
	nfd, sa, err := unix.Accept(fd)
	if err == nil {
		err = setFlags(nfd, true)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return -1, nil, err
	}
	return nfd, toNet(sa), nil
}

// LocalAddr returns the address fd is bound to.
func LocalAddr(fd int) (net.Addr, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return nil, os.NewSyscallError("getsockname", err)
	}
	return toNet(sa), nil
}

// PeerAddr returns the address of fd's peer.
func PeerAddr(fd int) (net.Addr, error) {
	sa, err := unix.Getpeername(fd)
	if err != nil {
		return nil, os.NewSyscallError("getpeername", err)
	}
	return toNet(sa), nil
}

// Connected reports whether fd's connect has completed (getpeername
// succeeds once the handshake is done).
func Connected(fd int) bool {
	_, err := unix.Getpeername(fd)
	return err == nil
}

// toNet converts a sockaddr into a net.Addr (nil for other families).
func toNet(sa unix.Sockaddr) net.Addr {
	switch s := sa.(type) {
	case *unix.SockaddrInet4:
		return NewTCPAddr(s.Addr[:], s.Port)
	case *unix.SockaddrInet6:
		return NewTCPAddr(s.Addr[:], s.Port)
	case *unix.SockaddrUnix:
		name := s.Name
		if name == "" {
			name = "@" // an unnamed socket, shown as Linux shows it
		}
		return &net.UnixAddr{Name: name, Net: "unix"}
	}
	return nil
}

// RawRead is read(2) on a non-blocking descriptor.
func RawRead(fd int, p []byte) (int, error) { return unix.Read(fd, p) }

// RawWrite is write(2) on a non-blocking descriptor.
func RawWrite(fd int, p []byte) (int, error) { return unix.Write(fd, p) }

// Family returns the address family of socket fd (AF_INET, AF_INET6,
// AF_UNIX).
func Family(fd int) (int, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return 0, os.NewSyscallError("getsockname", err)
	}
	switch sa.(type) {
	case *unix.SockaddrInet4:
		return unix.AF_INET, nil
	case *unix.SockaddrInet6:
		return unix.AF_INET6, nil
	case *unix.SockaddrUnix:
		return unix.AF_UNIX, nil
	}
	return 0, fmt.Errorf("%w: sockaddr %T", ErrNetwork, sa)
}

// Drops: only Linux counts a socket's drops (SO_MEMINFO).
func Drops(int) (uint32, error) { return 0, ErrNoDropCounter }

// RawWritev writes the first of iov's segments (the portable backend,
// its only caller outside Linux, sends the rest after the partial count
// it returns). Sound: Base points into heap memory the caller keeps
// referenced until the call returns, and Len is that memory's length.
func RawWritev(fd int, iov []unix.Iovec) (int, error) {
	return unix.Write(fd, unsafe.Slice(iov[0].Base, int(iov[0].Len)))
}
