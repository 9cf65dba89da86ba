package http

import "syscall"

// setRcvBuf sets SO_RCVBUF on a socket from syscall.RawConn.Control.
func setRcvBuf(fd uintptr, n int) error {
	return syscall.SetsockoptInt(syscall.Handle(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
}
