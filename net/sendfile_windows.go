//go:build windows

package net

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// SendFile on Windows: the portable backend copies every file through
// the output queue, so only preadFull is reached; the zero-copy calls
// answer an error if anything ever asks.

var errNoSendfile = errors.New("veloq: sendfile(2) is not available on Windows")

func dupSocket(int) (int, error) { return -1, errNoSendfile }

func sendfileSome(int, int, int64, int64, bool) (int, error) { return 0, errNoSendfile }

func pollWritable(int) bool { return false }

// softFDLimit: Windows has no RLIMIT_NOFILE, and no descriptor to spare
// for pipes or duplicates (0, as when the limit cannot be read).
func softFDLimit() uint64 { return 0 }

// preadFull reads len(buf) bytes of the file handle fd at off (on the
// pool): ReadFile with the offset in its OVERLAPPED, which a synchronous
// handle (what os.Open gives) reads at and then leaves its file pointer
// after, so SendFile's doc says the file offset is not used, not kept.
func preadFull(fd int, buf []byte, off int64) (int, error) {
	got := 0
	for got < len(buf) {
		at := off + int64(got)
		o := syscall.Overlapped{Offset: uint32(at), OffsetHigh: uint32(at >> 32)}
		var n uint32
		err := syscall.ReadFile(syscall.Handle(fd), buf[got:], &n, &o)
		switch {
		case err == syscall.ERROR_HANDLE_EOF || (err == nil && n == 0):
			return got, io.ErrUnexpectedEOF
		case err != nil:
			return got, os.NewSyscallError("ReadFile", err)
		}
		got += int(n)
	}
	return got, nil
}
