//go:build unix

package net

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// SendFile's system calls on unix (sendfile_windows.go: Windows copies).

// dupSocket returns a duplicate of fd, or -1 and why not. It refuses a
// descriptor in the upper half of the soft RLIMIT_NOFILE, which is kept
// for sockets (see getPipe).
func dupSocket(fd int) (int, error) {
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("fcntl", err)
	}
	if limit := softFDLimit(); uint64(d) >= limit/2 {
		closeFD(d)
		return -1, fmt.Errorf("descriptor %d is in the upper half of RLIMIT_NOFILE (%d)", d, limit)
	}
	return d, nil
}

// sendfileSome sends up to want bytes of the file at off into the
// non-blocking socket sock, until the socket is full (errAgain, with the
// count sent). On the pool it may block on the disk. With shortIsFull a
// short send counts as a full socket, as nginx takes it, which saves the
// call that would return EAGAIN: only for a wait that looks at the
// socket's state when it starts (an io_uring poll request), since an
// edge-triggered wait is woken only by a socket that EAGAIN marked full.
func sendfileSome(sock, fd int, off, want int64, shortIsFull bool) (int, error) {
	sent := 0
	for int64(sent) < want {
		o := off + int64(sent)
		ask := int(want - int64(sent))
		n, err := unix.Sendfile(sock, fd, &o, ask)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return sent + max(n, 0), errAgain
		case err != nil:
			return sent, os.NewSyscallError("sendfile", err)
		case n == 0:
			return sent, io.ErrUnexpectedEOF
		}
		sent += n
		if shortIsFull && n < ask {
			return sent, errAgain
		}
	}
	return sent, nil
}

// preadFull reads len(buf) bytes of the file at off (on the pool).
func preadFull(fd int, buf []byte, off int64) (int, error) {
	got := 0
	for got < len(buf) {
		n, err := unix.Pread(fd, buf[got:], off+int64(got))
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return got, os.NewSyscallError("pread", err)
		case n == 0:
			return got, io.ErrUnexpectedEOF
		}
		got += n
	}
	return got, nil
}

// pollWritable reports whether fd is writable now (poll(2), no wait).
func pollWritable(fd int) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	n, err := unix.Poll(pfd, 0)
	return err == nil && n > 0 && pfd[0].Revents&unix.POLLOUT != 0
}

// softFDLimit returns the soft RLIMIT_NOFILE (0 if it cannot be read). It
// is read each time, not once, because the limit can change while the
// process runs; that is one system call where a pipe is made or returned,
// against the four or more of a splice.
func softFDLimit() uint64 {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return uint64(lim.Cur) // int64 on FreeBSD
}
