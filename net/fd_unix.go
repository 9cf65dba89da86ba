//go:build unix

package net

import (
	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/internal/sock"
)

// The engine's calls on a connection's descriptor. On unix they are the
// system calls themselves, one-line functions the compiler inlines, so
// the io_uring and epoll paths compile to the calls they made before;
// fd_windows.go gives the same names to the portable backend's handles.

// iovec is one segment of a gathered write (outQueue.peekv).
type iovec = unix.Iovec

// sockaddr is the address a dialled connection connects to.
type sockaddr = unix.Sockaddr

// msghdr is one datagram's header in a batch (udp_mmsg.go).
type msghdr = unix.Msghdr

// msgTrunc flags a received datagram cut to its buffer.
const msgTrunc = unix.MSG_TRUNC

// The sizes of the sockaddrs kept in a batch (udp_mmsg.go).
const (
	sizeofSockaddrInet4 = unix.SizeofSockaddrInet4
	sizeofSockaddrInet6 = unix.SizeofSockaddrInet6
	sizeofSockaddrUnix  = unix.SizeofSockaddrUnix
)

// closeFD closes a descriptor the loop owns.
func closeFD(fd int) error { return unix.Close(fd) }

// shutdownWr half-closes fd's write side (CloseWrite).
func shutdownWr(fd int) error { return unix.Shutdown(fd, unix.SHUT_WR) }

// rawWritev is the portable backend's write on the loop: as much of iov
// as the socket takes now, EAGAIN once it is full.
func rawWritev(fd int, iov []iovec) (int, error) { return sock.RawWritev(fd, iov) }
