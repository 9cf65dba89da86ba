//go:build unix

package net

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/internal/sock"
)

// Descriptor passing (ListenFiles, ListenerFiles, activation, upgrade)
// on the systems that have it; inherit_windows.go refuses it.

// checkSocket returns the network of f's socket, or why it cannot be
// served as a socket of type typ.
func checkSocket(f *os.File, typ int) (string, error) {
	fd := int(f.Fd())
	where := fmt.Sprintf("%s (fd %d)", f.Name(), fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("veloq: %s: %w", where, os.NewSyscallError("fstat", err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return "", fmt.Errorf("%w: %s", ErrNotSocket, where)
	}
	got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return "", fmt.Errorf("veloq: %s: %w", where, os.NewSyscallError("getsockopt SO_TYPE", err))
	}
	family, err := sock.Family(fd)
	if err != nil {
		return "", fmt.Errorf("veloq: %s: %w", where, err)
	}
	want := map[int]string{syscall.SOCK_STREAM: "stream", syscall.SOCK_DGRAM: "datagram"}
	if got != typ {
		return "", fmt.Errorf("%w: %s is not a %s socket (SO_TYPE %d)", ErrSocketType, where, want[typ], got)
	}
	var network string
	switch family {
	case syscall.AF_INET, syscall.AF_INET6:
		network = map[int]string{syscall.SOCK_STREAM: "tcp", syscall.SOCK_DGRAM: "udp"}[typ]
	case syscall.AF_UNIX:
		network = map[int]string{syscall.SOCK_STREAM: "unix", syscall.SOCK_DGRAM: "unixgram"}[typ]
	default:
		return "", fmt.Errorf("%w: %s is of family %d (IPv4, IPv6 and Unix are served)", ErrSocketType, where, family)
	}
	if typ == syscall.SOCK_STREAM {
		on, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
		if err != nil {
			return "", fmt.Errorf("veloq: %s: %w", where, os.NewSyscallError("getsockopt SO_ACCEPTCONN", err))
		}
		if on == 0 {
			return "", fmt.Errorf("%w: %s", ErrNotListening, where)
		}
	}
	return network, nil
}

// dupFd returns a non-blocking close-on-exec duplicate of f's descriptor.
// O_NONBLOCK belongs to the open file description, which the duplicate
// shares with f (and with any other process holding it): veloq's own
// sockets are non-blocking already, and Go's net.FileListener sets it the
// same way on what it is given.
func dupFd(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("veloq: %s: %w", f.Name(), err)
	}
	fd := -1
	var derr error
	if err := rc.Control(func(raw uintptr) {
		fd, derr = unix.FcntlInt(raw, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, fmt.Errorf("veloq: %s: %w", f.Name(), err)
	}
	if derr != nil {
		return -1, fmt.Errorf("veloq: %s: %w", f.Name(), os.NewSyscallError("fcntl F_DUPFD_CLOEXEC", derr))
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		closeFD(fd)
		return -1, fmt.Errorf("veloq: %s: %w", f.Name(), os.NewSyscallError("fcntl O_NONBLOCK", err))
	}
	return fd, nil
}

// dupRaw returns a close-on-exec duplicate of descriptor fd.
func dupRaw(fd int) (int, error) {
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("fcntl F_DUPFD_CLOEXEC", err)
	}
	return d, nil
}

// inheritFd checks that descriptor fd, passed by the service manager, is
// open, and makes it close-on-exec.
func inheritFd(fd int) error {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		return err
	}
	unix.CloseOnExec(fd)
	return nil
}

// fdPassing: every unix passes descriptors.
func fdPassing() error { return nil }
