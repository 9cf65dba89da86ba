package http

import (
	"bytes"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// Blocking net/http handlers must cost a goroutine each, not one of a
// few pool workers: 64 handlers that each sleep for a second all run at
// the same time, by default and on a blocking pool.
func TestFromStdBlockingHandlersRunConcurrently(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		modes := []struct {
			name string
			opt  StdOption
		}{
			{"goroutine", nil},
			{"blocking-pool", WithStdBlockingPool(testBlockingPool(t, 64))},
		}
		for _, m := range modes {
			t.Run(m.name, func(t *testing.T) {
				const n = 64
				var inside, peak, finished atomic.Int64
				h := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
					now := inside.Add(1)
					for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
					}
					time.Sleep(time.Second) // a handler that blocks, e.g. on a database
					inside.Add(-1)
					io.WriteString(w, "slept")
				})
				s := startServer(t, b, FromStd(h, m.opt))
				start := time.Now()
				var wg sync.WaitGroup
				errs := make(chan error, n)
				for range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						c, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
						if err != nil {
							errs <- err
							return
						}
						defer c.Close()
						c.SetDeadline(time.Now().Add(30 * time.Second))
						io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
						body, err := io.ReadAll(c)
						if err != nil {
							errs <- err
							return
						}
						if !bytes.HasSuffix(body, []byte("\r\n\r\nslept")) {
							errs <- fmt.Errorf("response %q", body)
							return
						}
						finished.Add(1)
					}()
				}
				// With handlers holding two pool workers, this would take
				// 32 s; running side by side it takes about one.
				require.Eventually(t, func() bool { return finished.Load() == n }, 20*time.Second, 10*time.Millisecond,
					"finished %d of %d", finished.Load(), n)
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Error(err)
				}
				require.Less(t, time.Since(start), 20*time.Second)
				require.Greater(t, peak.Load(), int64(n/2), "handlers never ran side by side")
			})
		}
	})
}

// Stalled uploads (a head with Content-Length, part of the body, then
// nothing) block their handlers in Body.Read; a plain GET from another
// client is still answered.
func TestFromStdStalledUploadsDoNotStarve(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		const n = 50
		var reading atomic.Int64
		mux := nethttp.NewServeMux()
		mux.HandleFunc("POST /upload", func(w nethttp.ResponseWriter, r *nethttp.Request) {
			reading.Add(1)
			io.Copy(io.Discard, r.Body)
		})
		mux.HandleFunc("GET /", func(w nethttp.ResponseWriter, r *nethttp.Request) { io.WriteString(w, "alive") })
		s := startServer(t, b, FromStd(mux, nil))
		for range n {
			c, _ := rawConn(t, s)
			_, err := io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n"+string(make([]byte, 1000)))
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool { return reading.Load() == n }, 10*time.Second, 5*time.Millisecond,
			"%d of %d upload handlers started", reading.Load(), n)

		c, br := rawConn(t, s)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body := readResponse(t, br, "GET")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "alive", body)
	})
}
