package net

import "golang.org/x/sys/unix"

// The system calls under SpliceTo, Linux only (splice_other.go).

// spliceNB moves up to n bytes from rfd to wfd, one of them a pipe,
// without blocking.
func spliceNB(rfd, wfd, n int) (int64, error) {
	return unix.Splice(rfd, nil, wfd, nil, n, unix.SPLICE_F_NONBLOCK)
}

// pipe2 makes a non-blocking, close-on-exec pipe.
func pipe2(fds *[2]int) error { return unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC) }

// setPipeSize asks for a pipe of size bytes and returns the size it has
// (the kernel's default if the request is refused).
func setPipeSize(w, size int) (int, error) {
	got, err := unix.FcntlInt(uintptr(w), unix.F_SETPIPE_SZ, size)
	if err != nil {
		got, err = unix.FcntlInt(uintptr(w), unix.F_GETPIPE_SZ, 0)
	}
	return got, err
}
