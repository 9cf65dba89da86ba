package http

import (
	"bufio"
	"bytes"
	"io"
	nethttp "net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// goroutineID is the running goroutine's number, from its stack header.
func goroutineID() string {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	f := strings.Fields(string(buf[:n]))
	return f[1]
}

// idleStdWorkers counts the workers parked on s's loops.
func idleStdWorkers(s *Server) int {
	n := 0
	for _, ls := range s.loops {
		ls.std.mu.Lock()
		n += len(ls.std.idle)
		ls.std.mu.Unlock()
	}
	return n
}

// parkedStdWorkers counts the goroutines of the process parked as idle
// FromStd workers.
func parkedStdWorkers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("(*stdWorker).park"))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A FromStd handler runs on a goroutine that ran an earlier one when one
// is idle, so that its grown stack is reused instead of grown again for
// every request; the idle goroutines exit when the server closes.
func TestFromStdReusesHandlerGoroutines(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		before := parkedStdWorkers()
		ids := make(chan string, 1)
		s := startServer(t, b, FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			ids <- goroutineID()
			io.WriteString(w, "ok")
		})))
		c, br := rawConn(t, s)
		seen := map[string]int{}
		for i := range 20 {
			// The previous handler's worker parks after its response is
			// sent: wait for it, so the request finds it idle.
			require.Eventually(t, func() bool { return idleStdWorkers(s) == min(i, 1) }, 5*time.Second, time.Millisecond)
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, body := readResponse(t, br, "GET")
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, "ok", body)
			seen[<-ids]++
		}
		require.Len(t, seen, 1, "handler goroutines: %v", seen)
		require.NoError(t, s.Close())
		require.Eventually(t, func() bool { return parkedStdWorkers() <= before }, 5*time.Second, time.Millisecond,
			"idle workers left after Close")
	})
}

// Only a handler that finds no idle worker starts one: with more blocked
// handlers than a loop keeps idle, every request still runs at once.
func TestFromStdWorkersNeverQueue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		const n = maxIdleStdWorkers + 8
		release := make(chan struct{})
		started := make(chan struct{}, n)
		s := startServer(t, b, FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			started <- struct{}{}
			<-release
			io.WriteString(w, "ok")
		})), WithNetOptions(vnet.WithLoops(1)))
		conns := make([]*bufio.Reader, n)
		for i := range conns {
			c, br := rawConn(t, s)
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			conns[i] = br
		}
		for range n {
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("a handler waited for another to return")
			}
		}
		close(release)
		for _, r := range conns {
			resp, body := readResponse(t, r, "GET")
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, "ok", body)
		}
		require.Eventually(t, func() bool { return idleStdWorkers(s) == maxIdleStdWorkers }, 5*time.Second, time.Millisecond,
			"the loop keeps at most maxIdleStdWorkers idle")
	})
}
