package net

import (
	"fmt"
	"net"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/veloq/veloq/internal/sock"
)

// errAddrInUse is the errno a second listener on a busy port gets.
var errAddrInUse error = windows.WSAEADDRINUSE

// errConnRefused is the errno a dial to a closed port gets.
var errConnRefused error = windows.WSAECONNREFUSED

// noDelay reports TCP_NODELAY on c's socket. On Windows c.Fd() is a key
// into internal/sock's table of Go connections, so it asks the socket
// behind that connection.
func noDelay(c *Conn) (int, error) {
	tc, ok := sock.Get(c.Fd()).(*net.TCPConn)
	if !ok {
		return -1, fmt.Errorf("handle %d is not a TCP connection", c.Fd())
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return -1, err
	}
	var v int32
	n := int32(unsafe.Sizeof(v))
	var gerr error
	err = rc.Control(func(h uintptr) {
		// Getsockopt writes at most n bytes into v, an int32 of n bytes.
		gerr = windows.Getsockopt(windows.Handle(h), windows.IPPROTO_TCP, windows.TCP_NODELAY, (*byte)(unsafe.Pointer(&v)), &n)
	})
	if err == nil {
		err = gerr
	}
	if v != 0 {
		v = 1 // Windows may report the option as any non-zero value
	}
	return int(v), err
}
