//go:build unix

package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/http/client"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

func get(t *testing.T, c *nethttp.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode, string(body)
}

// A refused upstream: the request goes to the next one; with none left,
// 502.
func TestRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		good := stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) { w.Write([]byte("good")) })
		dead := closedAddr(t)
		p := newProxy(t, WithUpstreams(dead, good), WithEjection(0, 0, 0))
		addr := serve(t, b, p)
		c := httpClient()
		for i := 0; i < 6; i++ {
			code, body := get(t, c, "http://"+addr+"/")
			require.Equal(t, 200, code)
			require.Equal(t, "good", body)
		}
		// POST too: a refused connect sent nothing, so any method may go on.
		resp, err := c.Post("http://"+addr+"/", "text/plain", strings.NewReader("x"))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		st := p.Stats()
		require.NotZero(t, st.Upstreams[0].ConnectErrors)
		require.NotZero(t, st.Upstreams[1].Retries)

		only := newProxy(t, WithUpstreams(dead))
		addr2 := serve(t, b, only)
		code, _ := get(t, c, "http://"+addr2+"/")
		require.Equal(t, 502, code)
	})
}

// An upstream that never answers: 504 at the timeout, while another
// client is served meanwhile on the same single loop.
func TestUpstreamTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := rawUpstream(t, func(r *nethttp.Request) ([]byte, bool) {
			if r.URL.Path == "/hang" {
				return nil, false
			}
			return []byte("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfast"), false
		})
		p := newProxy(t, WithUpstreams(up), WithTimeout(2*time.Second))
		addr := serve(t, b, p)
		done := make(chan int, 1)
		go func() {
			resp, err := httpClient().Get("http://" + addr + "/hang")
			if err != nil {
				done <- -1
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		c := httpClient()
		require.Eventually(t, func() bool { return p.Stats().InFlight == 1 }, 5*time.Second, time.Millisecond)
		for i := 0; i < 5; i++ {
			code, body := get(t, c, "http://"+addr+"/x")
			require.Equal(t, 200, code)
			require.Equal(t, "fast", body)
		}
		select {
		case code := <-done:
			t.Fatalf("the hung request ended (%d) before the others were served", code)
		default: // served while the other waited
		}
		require.Equal(t, 504, <-done)
		require.Equal(t, uint64(1), p.Stats().Upstreams[0].Timeouts)
	})
}

// Malformed answers become 502 and never desync: bytes past an answer's
// end are not taken as the next answer.
func TestMalformed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := rawUpstream(t, func(r *nethttp.Request) ([]byte, bool) {
			switch r.URL.Path {
			case "/both":
				return []byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), false
			case "/switch":
				return []byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n"), false
			case "/garbage":
				return []byte("HTTP/1.1 ??? nonsense\r\n\r\n"), false
			case "/extra":
				return []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled"), false
			}
			return []byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nclean"), false
		})
		p := newProxy(t, WithUpstreams(up), WithEjection(0, 0, 0))
		addr := serve(t, b, p)
		c := httpClient()
		for _, path := range []string{"/both", "/garbage", "/switch"} {
			code, _ := get(t, c, "http://"+addr+path)
			require.Equal(t, 502, code, path)
			code, body := get(t, c, "http://"+addr+"/next")
			require.Equal(t, 200, code)
			require.Equal(t, "clean", body)
		}
		code, body := get(t, c, "http://"+addr+"/extra")
		require.Equal(t, 200, code)
		require.Equal(t, "ok", body)
		for i := 0; i < 3; i++ {
			code, body = get(t, c, "http://"+addr+"/next")
			require.Equal(t, 200, code)
			require.Equal(t, "clean", body, "never the smuggled answer")
		}
		require.Equal(t, uint64(3), p.Stats().Upstreams[0].BadResponses)
	})
}

// No upstream available: 503.
func TestNoUpstream503(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) {
			w.WriteHeader(500)
		})
		p := newProxy(t, WithUpstreams(up), WithEjection(2, time.Hour, time.Hour))
		addr := serve(t, b, p)
		c := httpClient()
		for i := 0; i < 2; i++ {
			code, _ := get(t, c, "http://"+addr+"/")
			require.Equal(t, 500, code, "the upstream's own answer passes")
		}
		require.Equal(t, "ejected", p.Stats().Upstreams[0].State)
		code, _ := get(t, c, "http://"+addr+"/")
		require.Equal(t, 503, code)
		require.Equal(t, uint64(1), p.Stats().NoUpstream)
	})
}

// Passive ejection after consecutive 5xx, then recovery after the
// cooldown.
func TestEjectionRecovery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var failing atomic.Bool
		failing.Store(true)
		var badHits atomic.Int64
		bad := stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) {
			badHits.Add(1)
			if failing.Load() {
				w.WriteHeader(503)
				return
			}
			w.Write([]byte("bad-fixed"))
		})
		good := stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) { w.Write([]byte("good")) })
		p := newProxy(t, WithUpstreams(bad, good), WithEjection(3, 200*time.Millisecond, time.Second))
		addr := serve(t, b, p)
		c := httpClient()
		for i := 0; i < 6; i++ {
			get(t, c, "http://"+addr+"/")
		}
		st := p.Stats()
		require.Equal(t, "ejected", st.Upstreams[0].State)
		require.Equal(t, uint64(1), st.Upstreams[0].Ejections)
		hits := badHits.Load()
		for i := 0; i < 10; i++ {
			code, body := get(t, c, "http://"+addr+"/")
			require.Equal(t, 200, code)
			require.Equal(t, "good", body)
		}
		require.Equal(t, hits, badHits.Load(), "no request to an ejected upstream")
		failing.Store(false)
		require.Eventually(t, func() bool {
			_, body := get(t, c, "http://"+addr+"/")
			return body == "bad-fixed"
		}, 5*time.Second, 20*time.Millisecond)
		require.Equal(t, "up", p.Stats().Upstreams[0].State)
	})
}

func TestRoundRobinSpread(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var hits [3]atomic.Int64
		var ups []string
		for i := range hits {
			ups = append(ups, stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) { hits[i].Add(1) }))
		}
		p := newProxy(t, WithUpstreams(ups...))
		addr := serve(t, b, p)
		c := httpClient()
		for i := 0; i < 30; i++ {
			code, _ := get(t, c, "http://"+addr+"/")
			require.Equal(t, 200, code)
		}
		for i := range hits {
			require.Equal(t, int64(10), hits[i].Load(), "upstream %d", i)
		}
	})
}

// The set changes under load (drain, remove, add) and no request fails.
func TestChangeUnderLoad(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		slow := func(w nethttp.ResponseWriter, r *nethttp.Request) {
			time.Sleep(2 * time.Millisecond) // an upstream doing work, so requests overlap
			w.Write([]byte("ok"))
		}
		a, bb, c3 := stdUpstream(t, slow), stdUpstream(t, slow), stdUpstream(t, slow)
		p := newProxy(t, WithUpstreams(a, bb), WithPolicy(LeastOutstanding))
		addr := serve(t, b, p, vhttp.WithNetOptions(vnet.WithLoops(2)))
		var fails, oks atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := httpClient()
				for {
					select {
					case <-stop:
						return
					default:
					}
					resp, err := c.Get("http://" + addr + "/")
					if err != nil {
						fails.Add(1)
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						fails.Add(1)
					} else {
						oks.Add(1)
					}
				}
			}()
		}
		require.Eventually(t, func() bool { return oks.Load() > 50 }, 10*time.Second, time.Millisecond)
		require.NoError(t, p.Add(c3))
		require.NoError(t, p.Drain(a))
		require.Eventually(t, func() bool { return len(p.Stats().Upstreams) == 2 }, 10*time.Second, time.Millisecond, "drained upstream removed")
		n := oks.Load()
		require.Eventually(t, func() bool { return oks.Load() > n+50 }, 10*time.Second, time.Millisecond)
		require.NoError(t, p.Remove(bb))
		n = oks.Load()
		require.Eventually(t, func() bool { return oks.Load() > n+50 }, 10*time.Second, time.Millisecond)
		close(stop)
		wg.Wait()
		require.Zero(t, fails.Load())
		st := p.Stats()
		require.Len(t, st.Upstreams, 1)
		require.Equal(t, c3, st.Upstreams[0].Addr)
		require.ErrorIs(t, p.Remove(a), ErrUnknownUpstream)
	})
}

// A large answer to a client that does not read: the upstream is paused,
// so what the proxy holds stays bounded; the whole body arrives once the
// client reads.
func TestSlowClientBackpressure(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		const size = 256 << 20
		var written atomic.Int64
		up := stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) {
			w.Header().Set("Content-Length", "268435456")
			chunk := make([]byte, 64<<10)
			for written.Load() < size {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				written.Add(int64(len(chunk)))
			}
		})
		p := newProxy(t, WithUpstreams(up))
		addr := serve(t, b, p)
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = conn.Write([]byte("GET /big HTTP/1.1\r\nHost: x\r\n\r\n"))
		require.NoError(t, err)
		last := int64(-1)
		require.Eventually(t, func() bool {
			w := written.Load()
			stable := w == last && p.Stats().Paused > 0
			last = w
			return stable
		}, 20*time.Second, 50*time.Millisecond)
		// Socket buffers on both sides plus the proxy's 256 KiB: far
		// below the body.
		require.Less(t, written.Load(), int64(64<<20), "the upstream was stopped")
		resp, err := nethttp.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		n, err := io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.Equal(t, int64(size), n)
	})
}

// A retry budget of nothing: the refused attempt is not retried, the
// client gets 502 and the refusal is counted.
func TestRetryBudget(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		good := stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) {})
		p := newProxy(t, WithUpstreams(closedAddr(t), good), WithRetries(1, 0, 0), WithEjection(0, 0, 0))
		addr := serve(t, b, p)
		c := httpClient()
		code, _ := get(t, c, "http://"+addr+"/") // round-robin: the dead one first
		require.Equal(t, 502, code)
		require.Equal(t, uint64(1), p.Stats().RetriesDenied)
		require.Zero(t, p.Stats().Upstreams[1].Retries)
	})
}

// A client that leaves while its upstream has not answered cancels the
// upstream request: nothing stays in flight.
func TestClientGoneCancels(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := rawUpstream(t, func(r *nethttp.Request) ([]byte, bool) { return nil, false })
		p := newProxy(t, WithUpstreams(up))
		addr := serve(t, b, p)
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = conn.Write([]byte("GET /hang HTTP/1.1\r\nHost: x\r\n\r\n"))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return p.Stats().InFlight == 1 }, 5*time.Second, time.Millisecond)
		conn.Close()
		require.Eventually(t, func() bool {
			st := p.Stats()
			return st.InFlight == 0 && st.Upstreams[0].InFlight == 0 && st.Upstreams[0].Canceled == 1
		}, 5*time.Second, time.Millisecond)
	})
}

// The proxy's own pool full: 503 at once, and no mark against the
// upstream.
func TestQueueFull503(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := rawUpstream(t, func(r *nethttp.Request) ([]byte, bool) { return nil, false })
		cl, err := client.New(client.WithNumLoops(1), client.WithMaxConnsPerHost(1), client.WithMaxQueuedPerHost(1))
		require.NoError(t, err)
		t.Cleanup(func() { cl.Close() })
		p := newProxy(t, WithUpstreams(up), WithClient(cl), WithTimeout(2*time.Second))
		addr := serve(t, b, p)
		codes := make(chan int, 2)
		for i := 0; i < 2; i++ { // one on the connection, one queued
			go func() {
				resp, err := httpClient().Get("http://" + addr + "/hang")
				if err != nil {
					codes <- -1
					return
				}
				resp.Body.Close()
				codes <- resp.StatusCode
			}()
			n := int64(i + 1)
			require.Eventually(t, func() bool { return p.Stats().InFlight == n }, 5*time.Second, time.Millisecond)
		}
		code, _ := get(t, httpClient(), "http://"+addr+"/third")
		require.Equal(t, 503, code)
		require.Equal(t, 504, <-codes)
		require.Equal(t, 504, <-codes)
		st := p.Stats().Upstreams[0]
		require.Zero(t, st.ResetErrors+st.ConnectErrors+st.BadResponses)
	})
}

// The timeout is on silence, not on the whole answer: a body that keeps
// coming for longer than the timeout passes whole; one that stops past
// it is cut.
func TestTimeoutIsIdle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) {
			for i := 0; i < 8; i++ {
				w.Write([]byte("part;"))
				w.(nethttp.Flusher).Flush()
				pause := 100 * time.Millisecond // paced parts: the upstream is slow, not silent
				if r.URL.Path == "/stall" && i == 3 {
					pause = 2 * time.Second
				}
				time.Sleep(pause)
			}
		})
		p := newProxy(t, WithUpstreams(up), WithTimeout(400*time.Millisecond))
		addr := serve(t, b, p)
		code, body := get(t, httpClient(), "http://"+addr+"/drip")
		require.Equal(t, 200, code)
		require.Equal(t, strings.Repeat("part;", 8), body)

		resp, err := httpClient().Get("http://" + addr + "/stall")
		require.NoError(t, err)
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Error(t, err, "a stalled answer is cut, never complete-looking")
		require.Equal(t, uint64(1), p.Stats().Upstreams[0].Timeouts)
	})
}

// Clients that leave in the middle of large answers (wrk stopping, a
// browser navigating away) are not the upstream's failures: the upstream
// stays in the set.
func TestClientsLeavingDoNotEject(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		big := make([]byte, 8<<20)
		up := stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) { w.Write(big) })
		p := newProxy(t, WithUpstreams(up), WithEjection(1, time.Second, time.Second))
		addr := serve(t, b, p)
		// Many clients leaving at once, as when a load generator stops:
		// some leave while the proxy is writing to them, before their
		// OnGone ran.
		for round := 0; round < 4; round++ {
			var wg sync.WaitGroup
			for i := 0; i < 32; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					conn, err := net.Dial("tcp", addr)
					if !assert.NoError(t, err) {
						return
					}
					defer conn.Close() // unread data: a reset
					conn.SetDeadline(time.Now().Add(10 * time.Second))
					_, err = conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
					assert.NoError(t, err)
					_, err = io.ReadFull(conn, make([]byte, 64<<10)) // the answer is streaming
					assert.NoError(t, err)
				}()
			}
			wg.Wait()
		}
		require.Eventually(t, func() bool { return p.Stats().Upstreams[0].InFlight == 0 }, 5*time.Second, time.Millisecond)
		st := p.Stats().Upstreams[0]
		require.Zero(t, st.Ejections, "no ejection for clients that left")
		require.Zero(t, st.ResetErrors, "clients that left are not upstream resets")
		code, body := get(t, httpClient(), "http://"+addr+"/")
		require.Equal(t, 200, code)
		require.Len(t, body, len(big))
	})
}

// TestFailedWriteDoesNotCancelTheNextClient: when the client's connection
// is already closing (Close with output still queued), the proxy's next
// Write of the answer fails; the proxy gives the answer up and its
// exchange goes back to the pool at once. The Responder kept the
// exchange's OnGone until the connection's OnClose, which then canceled
// the request the reused exchange served for another client: that client
// never got its answer (TestClientsLeavingDoNotEject/portable, 1 run in 3,
// where a reset client's close waits for the backend's goroutines).
func TestFailedWriteDoesNotCancelTheNextClient(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		const rounds = 16
		part := make([]byte, 8<<20) // more than the sockets hold: output stays queued
		// Per round, what lets /a/N send its next part and /b/N its end.
		var more, release [rounds + 1]chan struct{}
		for i := range more {
			more[i], release[i] = make(chan struct{}), make(chan struct{})
		}
		up := stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) {
			n, _ := strconv.Atoi(path.Base(r.URL.Path))
			wait := release[n]
			if strings.HasPrefix(r.URL.Path, "/a/") {
				w.Write(part)
				wait = more[n]
			} else {
				w.Write([]byte("head"))
			}
			w.(nethttp.Flusher).Flush()
			select {
			case <-wait:
				w.Write([]byte("tail"))
			case <-r.Context().Done():
			}
		})
		// Never paused: the next part of /a goes to Write, not to a wait.
		p := newProxy(t, WithUpstreams(up), WithMaxBuffered(64<<20))
		fronts := make(chan *vnet.Conn, 1)
		s, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
			if strings.HasPrefix(string(r.Target), "/a/") {
				fronts <- w.Conn()
			}
			p.ServeHTTP(w, r)
		}), vhttp.WithNetOptions(vnet.WithBackend(b), vnet.WithLoops(1)), vhttp.WithLogger(backendtest.Logger(t)))
		require.NoError(t, err)
		ln, err := s.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		addr := ln.String()
		onLoop := func(c *vnet.Conn, fn func()) {
			done := make(chan struct{})
			require.NoError(t, c.Loop().Post(func() { fn(); close(done) }))
			<-done
		}
		// The exchange is reused through a sync.Pool, which drops a Put
		// now and then under the race detector, and whose cache is per
		// P, which a loop that parked may not wake on: several rounds.
		for round := 1; round <= rounds; round++ {
			// A small receive buffer, set before the connect (which
			// turns its autotuning off): the server's socket fills first.
			small := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			}}
			a, err := small.Dial("tcp", addr)
			require.NoError(t, err)
			_, err = fmt.Fprintf(a, "GET /a/%d HTTP/1.1\r\nHost: x\r\n\r\n", round)
			require.NoError(t, err)
			front := <-fronts
			require.Eventually(t, func() bool {
				var n int
				onLoop(front, func() { n = front.OutputBuffered() })
				return n > 1<<20 // the sockets are full: Close will wait
			}, 5*time.Second, time.Millisecond, "a's answer queued in the server")
			// Closing, output still queued: the next part's Write fails
			// and the proxy gives a's answer up.
			onLoop(front, func() { front.Close() })
			close(more[round])
			require.Eventually(t, func() bool { return p.Stats().Upstreams[0].Canceled == uint64(round) }, 5*time.Second, time.Millisecond, "the proxy gave a's answer up")

			bc, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			bc.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = fmt.Fprintf(bc, "GET /b/%d HTTP/1.1\r\nHost: x\r\n\r\n", round)
			require.NoError(t, err)
			br := bufio.NewReader(bc)
			resp, err := nethttp.ReadResponse(br, nil)
			require.NoError(t, err)
			head := make([]byte, 4)
			_, err = io.ReadFull(resp.Body, head)
			require.NoError(t, err)
			require.Equal(t, "head", string(head))

			// a's connection closes now, while b's answer is in progress.
			onLoop(front, func() { front.Abort(io.ErrUnexpectedEOF) })
			require.Eventually(t, func() bool { return s.Stats().Conns == 1 }, 5*time.Second, time.Millisecond)
			a.Close()
			close(release[round])
			rest, err := io.ReadAll(resp.Body)
			require.NoError(t, err, "b got its whole answer")
			require.Equal(t, "tail", string(rest))
			bc.Close()
			require.Eventually(t, func() bool { return s.Stats().Conns == 0 }, 5*time.Second, time.Millisecond)
		}
	})
}

// The attempt timer an exchange leaves armed when a request ends (send)
// times the next request on the exchange out at the timeout, neither
// early (a timer armed by an earlier request fires before it, and must
// only re-arm) nor never.
func TestUpstreamTimeoutAfterReuse(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := rawUpstream(t, func(r *nethttp.Request) ([]byte, bool) {
			if r.URL.Path == "/hang" {
				return nil, false
			}
			return []byte("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfast"), false
		})
		const timeout = 600 * time.Millisecond
		p := newProxy(t, WithUpstreams(up), WithTimeout(timeout))
		addr := serve(t, b, p)
		c := httpClient()
		for i := 0; i < 10; i++ {
			code, _ := get(t, c, "http://"+addr+"/x")
			require.Equal(t, 200, code)
		}
		// Half a timeout later (a gap in time, which is what is tested,
		// not a wait for an event), the timers those requests left armed
		// fire half a timeout before the next request's own deadline.
		start := time.Now()
		require.Eventually(t, func() bool { return time.Since(start) > timeout/2 }, 5*time.Second, 10*time.Millisecond)
		start = time.Now()
		code, _ := get(t, c, "http://"+addr+"/hang")
		took := time.Since(start)
		require.Equal(t, 504, code)
		require.GreaterOrEqual(t, took, timeout, "timed out early")
		require.Less(t, took, 4*timeout, "timed out late")
		require.Equal(t, uint64(1), p.Stats().Upstreams[0].Timeouts)
	})
}

// Request smuggling attempts from a client are refused by the server's
// parser with 400 and never reach the upstream: Content-Length with
// Transfer-Encoding, two differing lengths, an obfuscated
// Transfer-Encoding, a bare LF, obs-fold.
func TestSmugglingNeverReachesUpstream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var seen atomic.Int64
		up := rawUpstream(t, func(r *nethttp.Request) ([]byte, bool) {
			seen.Add(1)
			return []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), false
		})
		addr := serve(t, b, newProxy(t, WithUpstreams(up)))
		for _, req := range []string{
			"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
			"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 40\r\n\r\nhello",
			"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
			"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
			"GET / HTTP/1.1\nHost: x\n\n",
			"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n",
		} {
			conn, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = io.WriteString(conn, req)
			require.NoError(t, err)
			resp, err := nethttp.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err, "%q", req)
			require.Equal(t, vhttp.StatusBadRequest, resp.StatusCode, "%q", req)
			conn.Close()
		}
		require.Zero(t, seen.Load(), "a smuggling attempt reached the upstream")
	})
}

// Clients that leave in the middle of answers through the proxy are
// counted as cancellations, by the proxy and by its client, never as
// upstream errors; the connections of those long answers are closed, so
// the pool's connections stay bounded, and the next request is answered.
func TestClientLeavingIsCanceledNotError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		big := make([]byte, 8<<20) // far past the drain's bound
		up := stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) { w.Write(big) })
		p := newProxy(t, WithUpstreams(up))
		addr := serve(t, b, p)
		const rounds = 4
		for i := 0; i < rounds; i++ {
			conn, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
			require.NoError(t, err)
			_, err = io.ReadFull(conn, make([]byte, 64<<10)) // the answer is streaming
			require.NoError(t, err)
			conn.Close() // unread data: a reset
			n := uint64(i + 1)
			require.Eventually(t, func() bool {
				st := p.Stats()
				return st.InFlight == 0 && st.Client.Canceled == n
			}, 10*time.Second, time.Millisecond)
		}
		st := p.Stats()
		u, cu := st.Upstreams[0], st.Client.Upstreams[0]
		require.Zero(t, st.Client.Errors, "clients that left are not the client's errors")
		require.EqualValues(t, rounds, u.Canceled)
		require.Zero(t, u.ResetErrors+u.ConnectErrors+u.Timeouts+u.BadResponses)
		require.Zero(t, cu.Drained, "an 8 MiB rest is not drained")
		require.Eventually(t, func() bool { return p.Stats().Client.Upstreams[0].Open == 0 }, 10*time.Second, time.Millisecond)
		code, body := get(t, httpClient(), "http://"+addr+"/")
		require.Equal(t, 200, code)
		require.Len(t, body, len(big))
		require.Equal(t, 1, p.Stats().Client.Upstreams[0].Open)
	})
}

// A client that leaves before its short answer came costs no upstream
// connection: the proxy's client reads the answer, discards it, and the
// connection serves the next request (a load generator stopping closes
// all its connections with requests in flight; each one used to cost a
// new upstream connection in the next run).
func TestClientLeavingKeepsUpstreamConnection(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		got, release := make(chan struct{}, 1), make(chan struct{})
		up := rawUpstream(t, func(r *nethttp.Request) ([]byte, bool) {
			if r.URL.Path == "/slow" {
				got <- struct{}{}
				<-release
			}
			return []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), false
		})
		var once sync.Once
		free := func() { once.Do(func() { close(release) }) }
		t.Cleanup(free) // before the upstream's cleanup waits for its goroutines
		p := newProxy(t, WithUpstreams(up))
		addr := serve(t, b, p)
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = conn.Write([]byte("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"))
		require.NoError(t, err)
		<-got
		conn.Close()
		require.Eventually(t, func() bool { return p.Stats().Upstreams[0].Canceled == 1 }, 10*time.Second, time.Millisecond)
		free()
		require.Eventually(t, func() bool { return p.Stats().Client.Drained == 1 }, 10*time.Second, time.Millisecond)

		code, body := get(t, httpClient(), "http://"+addr+"/")
		require.Equal(t, 200, code)
		require.Equal(t, "ok", body)
		st := p.Stats()
		require.EqualValues(t, 1, st.Client.NewConns, "the left client's upstream connection served the next request")
		require.EqualValues(t, 1, st.Client.Canceled)
		require.Zero(t, st.Client.Errors)
		u := st.Upstreams[0]
		require.Zero(t, u.ResetErrors+u.ConnectErrors+u.Timeouts+u.BadResponses)
	})
}
