//go:build unix

package net

import "golang.org/x/sys/unix"

// errAddrInUse is the errno a second listener on a busy port gets.
var errAddrInUse error = unix.EADDRINUSE

// noDelay reports TCP_NODELAY on c's socket.
func noDelay(c *Conn) (int, error) {
	return unix.GetsockoptInt(c.Fd(), unix.IPPROTO_TCP, unix.TCP_NODELAY)
}

// errConnRefused is the errno a dial to a closed port gets.
var errConnRefused error = unix.ECONNREFUSED
