//go:build linux

// Linux only: creates raw sockets with Linux's SOCK_CLOEXEC.

package websocket

import (
	"bytes"
	"net"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	vnet "github.com/veloq/veloq/net"
)

// BenchmarkIdleConnHeap reports the server's Go heap per idle upgraded
// connection (heapB/conn): b.N clients connect, upgrade and echo one
// message, then the heap is measured with all of them idle. The clients
// are raw sockets driven with syscalls, so they add no Go heap of their
// own; kernel socket memory and the loops' fixed receive buffers are not
// in the figure (bench/ws.sh measures RSS over 10,000 connections).
//
//	go test -run X -bench IdleConnHeap -benchtime 2000x ./websocket
func BenchmarkIdleConnHeap(b *testing.B) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil && uint64(2*b.N+256) > lim.Cur {
		b.Skipf("%d connections need %d open files (client and server side), ulimit -n is %d: use -benchtime Nx with a smaller N", b.N, 2*b.N+256, lim.Cur)
	}
	srv, _ := startWS(b, vnet.BackendEpoll, &HandlerFuncs{
		Message: func(c *Conn, typ MessageType, data []byte) { c.WriteMessage(typ, data) },
	})
	port := srv.Addr().(*net.TCPAddr).Port
	req := []byte("GET /ws HTTP/1.1\r\nHost: b\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	ping := mustMasked(OpBinary, true, 0, []byte("ping"))
	buf := make([]byte, 4096)
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		fds = append(fds, fd)
		if err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			b.Fatal(err)
		}
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 10})
		if _, err := unix.Write(fd, req); err != nil {
			b.Fatal(err)
		}
		if err := readUntil(fd, buf, []byte("\r\n\r\n")); err != nil {
			b.Fatal("handshake: ", err)
		}
		if _, err := unix.Write(fd, ping); err != nil {
			b.Fatal(err)
		}
		if err := readUntil(fd, buf, []byte("ping")); err != nil {
			b.Fatal("echo: ", err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "heapB/conn")
}

// readUntil reads from fd until the bytes read end with suffix.
func readUntil(fd int, buf, suffix []byte) error {
	got := 0
	for !bytes.HasSuffix(buf[:got], suffix) {
		n, err := unix.Read(fd, buf[got:])
		if err != nil {
			return err
		}
		if n == 0 {
			return unix.ECONNRESET
		}
		got += n
		if got == len(buf) {
			return unix.ENOBUFS
		}
	}
	return nil
}
