//go:build unix

package proxy

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"net"
	nethttp "net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// uploadSize is the large upload's size: 256 MiB, or VELOQ_UPLOAD_MIB
// MiB (1024 for the 1 GiB).
func uploadSize(t *testing.T) int64 {
	if s := os.Getenv("VELOQ_UPLOAD_MIB"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		return int64(n) << 20
	}
	return 256 << 20
}

// genBody is a body of n pseudo-random bytes produced as it is read
// (nothing held whole), hashed on the way.
type genBody struct {
	left int64
	rng  *rand.ChaCha8
	h    hash.Hash
}

func newGenBody(n int64, seed byte) *genBody {
	return &genBody{left: n, rng: rand.NewChaCha8([32]byte{seed}), h: sha256.New()}
}

func (g *genBody) Read(p []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), g.left)]
	_, _ = g.rng.Read(p)
	g.h.Write(p)
	g.left -= int64(len(p))
	return len(p), nil
}

func (g *genBody) sum() string { return fmt.Sprintf("%x", g.h.Sum(nil)) }

// slowReader is an upstream that reads the request body slowly (a
// millisecond's pause after every MiB), hashes it and answers "length
// hash"; a body that fails is reported on aborted. With stall, it stops
// reading after 8 MiB until stall reports false (at most 10 s): the
// proxy's side toward it backs up, whatever the machine's speed.
func slowReader(aborted chan<- error, stall func() bool) nethttp.HandlerFunc {
	return func(w nethttp.ResponseWriter, r *nethttp.Request) {
		h := sha256.New()
		buf := make([]byte, 64<<10)
		var n int64
		for {
			k, err := r.Body.Read(buf)
			h.Write(buf[:k])
			if (n+int64(k))>>20 != n>>20 {
				time.Sleep(time.Millisecond)
			}
			if stall != nil && n < 8<<20 && n+int64(k) >= 8<<20 {
				for end := time.Now().Add(10 * time.Second); stall() && time.Now().Before(end); {
					time.Sleep(time.Millisecond)
				}
			}
			n += int64(k)
			if err == io.EOF {
				break
			}
			if err != nil {
				if aborted != nil {
					aborted <- err
				}
				return
			}
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	}
}

// heapWatch samples the heap in use until stopped and reports the most
// it grew above where it started.
func heapWatch() (stop func() uint64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var most atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > base && ms.HeapInuse-base > most.Load() {
				most.Store(ms.HeapInuse - base)
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return most.Load()
	}
}

// streaming serves the proxy with request bodies streamed, as
// cmd/veloq-proxy does.
func streaming(p *Proxy) vhttp.Handler { return vhttp.StreamBody(p, 0) }

// TestStreamedUpload sends a large body (256 MiB; VELOQ_UPLOAD_MIB sets
// another size) through the proxy to an upstream that reads it slowly:
// it arrives intact, the proxy paused the client's body for the upstream
// (Stats.BodyPaused), and the process's heap grew by a small fraction of
// the body, so the proxy held a bounded amount. Served without
// StreamBody, as before it existed, the same upload gets 413.
func TestStreamedUpload(t *testing.T) {
	size := uploadSize(t)
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var p *Proxy
		var ready atomic.Bool
		up := stdUpstream(t, slowReader(nil, func() bool { return !ready.Load() || p.Stats().BodyPaused == 0 }))
		p = newProxy(t, WithUpstreams(up))
		ready.Store(true)
		addr := serve(t, b, streaming(p))
		body := newGenBody(size, 1)
		req, err := nethttp.NewRequest("POST", "http://"+addr+"/upload", body)
		require.NoError(t, err)
		req.ContentLength = size
		stop := heapWatch()
		cl := &nethttp.Client{Timeout: 60 * time.Second}
		resp, err := cl.Do(req)
		grew := stop()
		require.NoError(t, err)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, string(got))
		require.Equal(t, fmt.Sprintf("%d %s", size, body.sum()), string(got))
		require.Greater(t, p.Stats().BodyPaused, uint64(0), "the slow upstream never held the client back")
		t.Logf("heap in use grew by at most %d KiB for a %d MiB body", grew>>10, size>>20)
		require.Less(t, grew, uint64(32<<20), "the heap grew with the body")
	})
}

// TestStreamedChunkedUpload: a body of unknown length (chunked from the
// client) arrives intact at an HTTP/1.1 upstream (chunked) and at an
// h2c one (DATA frames within its windows).
func TestStreamedChunkedUpload(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		h2up, _ := h2cStdUpstream(t, slowReader(nil, nil))
		for _, up := range []string{stdUpstream(t, slowReader(nil, nil)), "h2c://" + h2up} {
			p := newProxy(t, WithUpstreams(up))
			addr := serve(t, b, streaming(p))
			body := newGenBody(24<<20, 2)
			req, err := nethttp.NewRequest("PUT", "http://"+addr+"/upload", io.MultiReader(body))
			require.NoError(t, err)
			req.ContentLength = -1
			resp, err := httpClient().Do(req)
			require.NoError(t, err)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, fmt.Sprintf("%d %s", 24<<20, body.sum()), string(got), up)
		}
	})
}

// TestStreamedUploadCut: a client that closes its connection in the
// middle of its body makes the upstream see an aborted request, never a
// complete one.
func TestStreamedUploadCut(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		aborted := make(chan error, 1)
		up := stdUpstream(t, slowReader(aborted, nil))
		p := newProxy(t, WithUpstreams(up))
		addr := serve(t, b, streaming(p))
		for _, chunked := range []bool{false, true} {
			c := dialRaw(t, addr)
			if chunked {
				fmt.Fprintf(c, "POST /cut HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
			} else {
				fmt.Fprintf(c, "POST /cut HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 8<<20)
			}
			part := make([]byte, 256<<10)
			binary.LittleEndian.PutUint64(part, 42)
			for range 4 {
				if chunked {
					fmt.Fprintf(c, "%x\r\n", len(part))
				}
				_, err := c.Write(part)
				require.NoError(t, err)
				if chunked {
					fmt.Fprintf(c, "\r\n")
				}
			}
			c.Close()
			select {
			case err := <-aborted:
				require.Error(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("the upstream did not see the request cut")
			}
		}
	})
}

// TestStreamedUploadH2Front: an HTTP/2 client's body streams through the
// proxy with the stream's flow control: it arrives intact at the slow
// upstream.
func TestStreamedUploadH2Front(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := stdUpstream(t, slowReader(nil, nil))
		p := newProxy(t, WithUpstreams(up))
		addr := serve(t, b, streaming(p))
		tr := &nethttp.Transport{Protocols: new(nethttp.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		defer tr.CloseIdleConnections()
		c := &nethttp.Client{Transport: tr, Timeout: 30 * time.Second}
		body := newGenBody(32<<20, 3)
		resp, err := c.Post("http://"+addr+"/upload", "application/octet-stream", io.MultiReader(body))
		require.NoError(t, err)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 2, resp.ProtoMajor)
		require.Equal(t, fmt.Sprintf("%d %s", 32<<20, body.sum()), string(got))
	})
}

// dialRaw connects to addr for hand-written requests, closed at the end.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestStreamedUploadNotRetried: an upstream that fails after taking part
// of a streamed body (an idempotent PUT, on a connection it closes) is
// not retried on another upstream, which could only get the body's
// rest: the client gets 502 and the other upstream sees nothing.
func TestStreamedUploadNotRetried(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		breaker := backendtest.ServeTCP(t, func(c net.Conn, _ int) {
			br := bufio.NewReader(c)
			r, err := nethttp.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.CopyN(io.Discard, r.Body, 1<<20)
			c.Close()
		})
		var other atomic.Int32
		good := stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) {
			other.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
		})
		p := newProxy(t, WithUpstreams(breaker, good), WithPolicy(RoundRobin), WithRetries(1, 1, 10))
		addr := serve(t, b, streaming(p))
		// Round robin from the first upstream: try until the breaker got
		// one (at most a few requests).
		for i := 0; i < 4; i++ {
			body := newGenBody(8<<20, 4)
			req, err := nethttp.NewRequest("PUT", "http://"+addr+"/up", body)
			require.NoError(t, err)
			req.ContentLength = 8 << 20
			before := other.Load()
			resp, err := httpClient().Do(req)
			if err != nil {
				continue // the proxy may close the client's connection mid-body
			}
			resp.Body.Close()
			if resp.StatusCode == vhttp.StatusBadGateway {
				require.Equal(t, before, other.Load(), "the request was retried")
				return
			}
		}
		t.Fatal("no request reached the failing upstream")
	})
}

// TestStreamedUploadRetriedAfterRefused: a streamed upload whose first
// upstream refuses the connect goes to the next upstream whole, with
// Content-Length and chunked, to an HTTP/1.1 and an h2c upstream: the
// proxy reads none of the client's body before an attempt's connection
// is up, so a refused connect took nothing a retry would lack.
func TestStreamedUploadRetriedAfterRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		h2up, _ := h2cStdUpstream(t, slowReader(nil, nil))
		dead := closedAddr(t)
		for _, pair := range [][2]string{{dead, stdUpstream(t, slowReader(nil, nil))}, {"h2c://" + dead, "h2c://" + h2up}} {
			p := newProxy(t, WithUpstreams(pair[0], pair[1]), WithPolicy(RoundRobin), WithEjection(0, 0, 0))
			addr := serve(t, b, streaming(p))
			// Round robin: of two requests, one goes to the dead upstream
			// first.
			for i, chunked := range []bool{false, false, true, true} {
				body := newGenBody(4<<20, byte(10+i))
				req, err := nethttp.NewRequest("POST", "http://"+addr+"/up", io.MultiReader(body))
				require.NoError(t, err)
				req.ContentLength = 4 << 20
				if chunked {
					req.ContentLength = -1
				}
				resp, err := httpClient().Do(req)
				require.NoError(t, err)
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.Equal(t, 200, resp.StatusCode, "%s chunked=%v: %s", pair[1], chunked, got)
				require.Equal(t, fmt.Sprintf("%d %s", 4<<20, body.sum()), string(got))
			}
			st := p.Stats()
			require.NotZero(t, st.Upstreams[0].ConnectErrors, pair[0])
			require.NotZero(t, st.Upstreams[1].Retries, pair[1])
		}
	})
}

// trailerEcho is an upstream that reads the body and answers its length
// and the trailer fields it got, sorted ("5 X-Sum=v").
func trailerEcho(w nethttp.ResponseWriter, r *nethttp.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	var kv []string
	for k, v := range r.Trailer {
		kv = append(kv, k+"="+strings.Join(v, ","))
	}
	slices.Sort(kv)
	fmt.Fprintf(w, "%d %s", n, strings.Join(kv, " "))
}

// TestStreamedUploadTrailers: the trailer fields of a client's chunked
// body (HTTP/1.1) or of its HTTP/2 stream reach an HTTP/1.1 upstream (a
// chunked trailer section) and an h2c one (trailing HEADERS), without
// the hop-by-hop ones.
func TestStreamedUploadTrailers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		h2up, _ := h2cStdUpstream(t, trailerEcho)
		for _, up := range []string{stdUpstream(t, trailerEcho), "h2c://" + h2up} {
			p := newProxy(t, WithUpstreams(up))
			addr := serve(t, b, streaming(p))

			c := dialRaw(t, addr)
			fmt.Fprintf(c, "POST /t HTTP/1.1\r\nHost: x\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n"+
				"5\r\nhello\r\n0\r\nX-Sum: v1\r\nKeep-Alive: timeout=5\r\n\r\n")
			resp, err := nethttp.ReadResponse(bufio.NewReader(c), nil)
			require.NoError(t, err)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, "5 X-Sum=v1", string(got), up)

			tr := &nethttp.Transport{Protocols: new(nethttp.Protocols)}
			tr.Protocols.SetUnencryptedHTTP2(true)
			req, err := nethttp.NewRequest("POST", "http://"+addr+"/t", io.MultiReader(strings.NewReader("hello!")))
			require.NoError(t, err)
			req.Trailer = nethttp.Header{"X-Sum": {"v2"}}
			resp, err = (&nethttp.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
			require.NoError(t, err)
			got, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			tr.CloseIdleConnections()
			require.Equal(t, 2, resp.ProtoMajor)
			require.Equal(t, "6 X-Sum=v2", string(got), up)
		}
	})
}
