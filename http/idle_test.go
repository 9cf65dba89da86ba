//go:build unix

package http

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
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
	require.LessOrEqual(t, unsafe.Sizeof(conn{}), uintptr(128), "conn")
}

// TestIdleKeepAliveHeap: a keep-alive connection that made a request and
// waits for the next holds no per-request state. N clients (raw sockets,
// so that only the server's heap counts) each make one GET and stay;
// the server's live heap per connection is then its vnet.Conn (256
// bytes, the peer address inside), conn (128), its place in the loop's
// deadline heap (8) and the loop's and backend's slot records, about
// 350 bytes on io_uring and epoll. Before the request state went back
// to the loop it was 1,050; before the Conn held the peer address and
// the conn dropped two fields, 540 (io_uring, the epoll figure varied
// with when the flat slot tables doubled: 250 to 620); before the
// connections' deadlines shared one loop timer (connTimers), each had a
// vnet.Timer and a closure, 48 bytes and two allocations more: 415-429
// bytes io_uring, 395 epoll.
func TestIdleKeepAliveHeap(t *testing.T) {
	const n = 400
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		limit, allocLimit := 500.0, 5.0
		if b == vnet.BackendPortable {
			// The portable backend's own cost comes on top, about 18 KB
			// (its 16 KiB read buffer, Go's net.Conn, the reader's
			// channels): 18,800 bytes here, 19,300 before.
			limit, allocLimit = 19100, 24
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
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0) // a test process: no exec, no CLOEXEC needed (macOS has no SOCK_CLOEXEC)
			require.NoError(t, err)
			fds = append(fds, fd)
			require.NoError(t, unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}))
			require.NoError(t, unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 10}))
			_, err = unix.Write(fd, req)
			require.NoError(t, err)
			got := 0
			for !bytes.HasSuffix(buf[:got], []byte("\r\n\r\nok")) {
				k, err := unix.Read(fd, buf[got:])
				if err == unix.EINTR { // Go's preemption signal interrupted the blocking read
					continue
				}
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
		allocs := float64(after.Mallocs-before.Mallocs) / n
		t.Logf("%s: %.0f bytes of heap per idle keep-alive connection, %.2f allocations per connection", b, perConn, allocs)
		require.Less(t, perConn, limit)
		// The allocations are the robust figure (the heap's moves with
		// what other goroutines hold at the two readings, by tens of
		// bytes a connection): the Conn, the conn, the loop's and the
		// backend's table chunks (amortized) and the test's own address
		// and descriptor list, about 4.05 on io_uring and epoll. A Timer
		// and its closure per connection made it 6.05.
		require.LessOrEqual(t, allocs, allocLimit, "allocations per idle connection")
		require.EqualValues(t, n+50, s.Stats().Conns, "every connection still open")
	})
}

// TestReqStateNotShared: request states go from connection to connection
// through the loop's free list, and none is shared. A detached answer
// whose client left keeps its connection's state out of the list (its
// Responder, called later, writes nowhere); meanwhile other clients on
// the same loop send bodies that arrive in pieces (collected in the
// state's buffer), pipelined requests and chunked bodies, one after the
// other and interleaved, and each gets its own body back.
func TestReqStateNotShared(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		held := make(chan *Responder, 1)
		gone := make(chan struct{})
		s := startServer(t, b, HandlerFunc(func(w *ResponseWriter, req *Request) {
			if string(req.Path) == "/hold" {
				r, err := w.Detach()
				if err != nil {
					panic(err)
				}
				r.OnGone(func() { close(gone) })
				held <- r
				return
			}
			w.Write(req.Body)
		}), WithNetOptions(vnet.WithLoops(1)))

		a, _ := rawConn(t, s)
		io.WriteString(a, "POST /hold HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nAAAAA")
		r := <-held
		a.Close()
		<-gone

		post := func(c net.Conn, body string, chunked bool) {
			if chunked {
				fmt.Fprintf(c, "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(body), body)
				io.WriteString(c, "0\r\n\r\n")
				return
			}
			fmt.Fprintf(c, "POST /l HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))
			io.WriteString(c, body[:len(body)/2]) // the rest in a second write
			io.WriteString(c, body[len(body)/2:])
		}
		c1, br1 := rawConn(t, s)
		c2, br2 := rawConn(t, s)
		for i := range 20 {
			b1 := strings.Repeat(string(rune('a'+i%26)), 100+i)
			b2 := strings.Repeat(string(rune('A'+i%26)), 3000+i)
			post(c1, b1, i%2 == 0)
			post(c2, b2, i%3 == 0)
			if i%5 == 0 { // pipelined: two requests before reading
				post(c1, b1, false)
				_, got := readResponse(t, br1, "POST")
				require.Equal(t, b1, got, "request %d", i)
			}
			_, got := readResponse(t, br1, "POST")
			require.Equal(t, b1, got, "request %d", i)
			_, got = readResponse(t, br2, "POST")
			require.Equal(t, b2, got, "request %d", i)
		}
		// The held answer's Responder is dead: its writes go nowhere.
		done := make(chan error, 1)
		require.NoError(t, r.Loop().Post(func() {
			_, err := r.Write([]byte("late"))
			r.End()
			done <- err
		}))
		require.ErrorIs(t, <-done, net.ErrClosed)
		post(c2, "after", false)
		_, got := readResponse(t, br2, "POST")
		require.Equal(t, "after", got)
	})
}

// TestConnDeadlinesShareOneTimer: a loop's connections' deadlines are
// one heap (connTimers) served by one loop timer. Connections whose
// deadlines come in a different order from their accepts, some leaving
// before theirs (taken out of the middle of the heap), some moved later
// by a request: each is closed once its own idle timeout passed since
// its last request, none before, and the one still busy stays open.
func TestConnDeadlinesShareOneTimer(t *testing.T) {
	const idle = 300 * time.Millisecond
	const clockSlack = 20 * time.Millisecond // the loop clock is cached for an iteration
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler),
			WithReadHeaderTimeout(10*time.Second), WithNextRequestTimeout(idle), WithNetOptions(vnet.WithLoops(1)))
		type client struct {
			c    net.Conn
			br   *bufio.Reader
			last time.Time
		}
		var cs []*client
		for i := range 12 {
			c, br := rawConn(t, s)
			cl := &client{c: c, br: br, last: time.Now()}
			require.NoError(t, getRoot(c, br), "client %d", i)
			cs = append(cs, cl)
		}
		// Every third leaves, every third but one asks again (its
		// deadline moves past the others'), in reverse accept order.
		for i := len(cs) - 1; i >= 0; i-- {
			switch i % 3 {
			case 0:
				cs[i].c.Close()
			case 1:
				cs[i].last = time.Now()
				require.NoError(t, getRoot(cs[i].c, cs[i].br), "client %d", i)
			}
		}
		// A connection in the middle of a head has the read-header
		// timeout (10 s) instead, and outlives the others.
		busy, busyBr := rawConn(t, s)
		_, err := io.WriteString(busy, "GET / HTTP/1.1\r\n")
		require.NoError(t, err)
		for i, cl := range cs {
			if i%3 == 0 {
				continue
			}
			expectClosed(t, cl.c, cl.br)
			require.GreaterOrEqual(t, time.Since(cl.last), idle-clockSlack, "client %d closed before its idle timeout", i)
		}
		_, err = io.WriteString(busy, "Host: x\r\n\r\n")
		require.NoError(t, err)
		resp, _ := readResponse(t, busyBr, "GET")
		require.Equal(t, 200, resp.StatusCode, "the connection with a later deadline is served")
	})
}
