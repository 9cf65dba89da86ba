package http

import (
	"bufio"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// TestPipelinedFloodKeepsLoopFair: one client sends 20,000 pipelined GETs in
// one burst and starts reading its responses only 0.3 s later, as a busy
// client does; meanwhile a second client on the same loop makes ordinary
// requests. Every flooded request is answered, in order, and the second
// client is never kept waiting long: the flooding connection's output
// stops its reading at the high-water mark instead of growing (or being
// copied) without bound. The latency bound is loose on purpose (this is a
// behaviour test, not a benchmark): the defect it guards against kept the
// second client waiting 6–16 s.
func TestPipelinedFloodKeepsLoopFair(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		const n = 20000
		s := startServer(t, b, HandlerFunc(func(w *ResponseWriter, r *Request) { w.Write(r.Path) }), WithNetOptions(vnet.WithLoops(1)))
		addr := s.Addr().String()

		flood, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer flood.Close()
		var burst []byte
		for i := range n {
			burst = fmt.Appendf(burst, "GET /%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
		}
		wrote := make(chan error, 1)
		go func() {
			flood.SetWriteDeadline(time.Now().Add(60 * time.Second))
			_, err := flood.Write(burst)
			wrote <- err
		}()

		other, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer other.Close()
		var done atomic.Bool
		var worst atomic.Int64
		probed := make(chan error, 1)
		go func() {
			br := bufio.NewReader(other)
			for i := 0; i < 5000 && !done.Load(); i++ {
				start := time.Now()
				other.SetDeadline(start.Add(30 * time.Second))
				if _, err := io.WriteString(other, "GET /probe HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
					probed <- err
					return
				}
				resp, err := nethttp.ReadResponse(br, nil)
				if err != nil {
					probed <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if d := int64(time.Since(start)); d > worst.Load() {
					worst.Store(d)
				}
			}
			probed <- nil
		}()

		// The flooding client is busy for 0.3 s before it reads (this
		// sleep is the behaviour under test, not a synchronization).
		time.Sleep(300 * time.Millisecond)
		flood.SetReadDeadline(time.Now().Add(60 * time.Second))
		br := bufio.NewReaderSize(flood, 64<<10)
		for i := range n {
			resp, err := nethttp.ReadResponse(br, nil)
			require.NoError(t, err, "response %d", i)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, "/"+strconv.Itoa(i), string(body), "responses out of order")
		}
		done.Store(true)
		require.NoError(t, <-wrote)
		require.NoError(t, <-probed)
		t.Logf("%s: worst wait of the other client during the flood: %v", b, time.Duration(worst.Load()))
		require.Less(t, time.Duration(worst.Load()), time.Second, "the flood starved another client of the loop")
	})
}
