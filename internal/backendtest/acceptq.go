//go:build unix

package backendtest

import (
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FullAcceptQueue returns a blocking listening socket on 127.0.0.1 (its
// accepts time out after 10 s) and its address. Its accept queue holds
// one connection (backlog 0), which is made, so the kernel drops further
// SYNs until it is taken: a connect to it hangs, and completes when the
// test accepts once and the client's SYN is retransmitted (after 1 s).
// The test is skipped on a kernel that completes such connects anyway.
func FullAcceptQueue(t testing.TB) (fd int, addr string) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.CloseOnExec(fd) // a test's helper: no fork races it
	t.Cleanup(func() { unix.Close(fd) })
	tv := unix.NsecToTimeval(int64(10 * time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr = fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)
	filler, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filler.Close() })
	if c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond); err == nil {
		c.Close()
		t.Skip("this kernel completes connects to a listener with a full accept queue")
	}
	return fd, addr
}
