package http

import (
	"bytes"
	"net"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	vnet "github.com/veloq/veloq/net"
)

// TestIdleConnFootprint guards what an idle keep-alive connection keeps
// of the server's own state: the conn record, without the request state
// (parser, body, answer framing, completion record), which goes back to
// the loop between requests.
func TestIdleConnFootprint(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(conn{}), uintptr(144), "conn")
}

// TestIdleKeepAliveHeap: a keep-alive connection that made a request and
// waits for the next holds no per-request state. N clients (raw sockets,
// so that only the server's heap counts) each make one GET and stay;
// the server's live heap per connection is then its vnet.Conn (288
// bytes), conn (144), peer address (64), timer (48) and the backend's
// slot record, about 530 bytes on io_uring and epoll; before the request
// state went back to the loop it was 1,050 (measured without -race;
// about 100 more under it).
func TestIdleKeepAliveHeap(t *testing.T) {
	const n = 400
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		limit := 800.0
		if b == vnet.BackendPortable {
			// The portable backend's own cost comes on top, about 18 KB
			// (its 16 KiB read buffer, Go's net.Conn, the reader's
			// channels): 18,800 bytes here, 19,300 before.
			limit = 19100
		}
		s := startServer(t, b, HandlerFunc(func(w *ResponseWriter, req *Request) {
			w.WriteString("ok")
		}), WithNetOptions(vnet.WithLoops(1)))
		port := s.Addr().(*net.TCPAddr).Port
		var fds []int
		t.Cleanup(func() {
			for _, fd := range fds {
				unix.Close(fd)
			}
		})
		req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		buf := make([]byte, 512)
		dial := func() {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			require.NoError(t, err)
			fds = append(fds, fd)
			require.NoError(t, unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}))
			require.NoError(t, unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 10}))
			_, err = unix.Write(fd, req)
			require.NoError(t, err)
			got := 0
			for !bytes.HasSuffix(buf[:got], []byte("\r\n\r\nok")) {
				k, err := unix.Read(fd, buf[got:])
				require.NoError(t, err)
				require.NotZero(t, k, "closed after %q", buf[:got])
				got += k
			}
		}
		// Warm up: the loop's tables, pools and caches are not what is
		// measured.
		for range 50 {
			dial()
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range n {
			dial()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perConn := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
		t.Logf("%s: %.0f bytes of heap per idle keep-alive connection", b, perConn)
		require.Less(t, perConn, limit)
		require.EqualValues(t, n+50, s.Stats().Conns, "every connection still open")
	})
}
