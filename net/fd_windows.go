//go:build windows

package net

import (
	"net"
	"syscall"

	"github.com/veloq/veloq/internal/sock"
)

// On Windows the engine's "descriptor" is a handle into internal/sock's
// table of net's own sockets (net.FileConn does not exist there, so the
// loop cannot make a socket and hand it to net): the calls fd_unix.go
// makes on a descriptor go to that table instead.

// iovec is one segment of a gathered write, shaped as unix.Iovec is.
type iovec struct {
	Base *byte
	Len  uint64
}

// SetLen sets the segment's length, as unix.Iovec's does.
func (v *iovec) SetLen(n int) { v.Len = uint64(n) }

// sockaddr is the address a dialled connection connects to: net.Dial
// takes it on the connect goroutine.
type sockaddr = net.Addr

// closeFD closes handle fd's socket and forgets the handle.
func closeFD(fd int) error { return sock.Close(fd) }

// shutdownWr half-closes handle fd's connection's write side.
func shutdownWr(fd int) error { return sock.Shutdown(fd, true) }

// rawWritev: the loop never writes to a Windows socket itself (a Write
// there may wait); EAGAIN sends the output to the connection's writer
// goroutine at once.
func rawWritev(int, []iovec) (int, error) { return 0, syscall.EAGAIN }
