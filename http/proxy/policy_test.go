//go:build unix

package proxy

import (
	"fmt"
	"io"
	nethttp "net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

func testSet(t *testing.T, p *Proxy) []*upstream { return p.ups.load().list }

// P2C least-outstanding never picks the busier of two.
func TestLeastOutstanding(t *testing.T) {
	p := newProxy(t, WithUpstreams("127.0.0.1:1", "127.0.0.1:2"), WithPolicy(LeastOutstanding))
	ups := testSet(t, p)
	ups[0].inflight.Store(5)
	for i := 0; i < 100; i++ {
		require.Same(t, ups[1], p.pick(p.ups.load(), 0, nil, nil))
	}
}

// Peak EWMA: a slow upstream is avoided at once (peak), and a fast stream
// of failures is not attractive (penalty).
func TestPeakEWMA(t *testing.T) {
	p := newProxy(t, WithUpstreams("127.0.0.1:1", "127.0.0.1:2"), WithPolicy(PeakEWMA),
		WithPeakEWMA(10*time.Second, time.Second), WithEjection(0, 0, 0))
	ups := testSet(t, p)
	now := int64(time.Hour)
	for i := 0; i < 10; i++ {
		ups[0].observe(now, float64(time.Millisecond), p.cfg.ewmaTau)
		ups[1].observe(now, float64(time.Millisecond), p.cfg.ewmaTau)
	}
	ups[1].observe(now, float64(200*time.Millisecond), p.cfg.ewmaTau) // one slow answer
	require.Same(t, ups[0], p.pick(p.ups.load(), now, nil, nil))

	// Upstream 0 now answers 5xx in 10 µs; upstream 1 is slow but sound.
	q := newProxy(t, WithUpstreams("127.0.0.1:1", "127.0.0.1:2"), WithPolicy(PeakEWMA), WithEjection(0, 0, 0))
	ups = testSet(t, q)
	ups[1].observe(now, float64(50*time.Millisecond), q.cfg.ewmaTau)
	for i := 0; i < 100; i++ {
		ups[0].observe(now, max(float64(10*time.Microsecond), q.cfg.penalty), q.cfg.ewmaTau)
	}
	require.Same(t, ups[1], q.pick(q.ups.load(), now, nil, nil))
}

// Through the proxy: an upstream answering 500 at once loses to a
// slower sound one under peak EWMA.
func TestPeakEWMAFastErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var badHits, goodHits atomic.Int64
		bad := stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) { badHits.Add(1); w.WriteHeader(500) })
		good := stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) {
			goodHits.Add(1)
			time.Sleep(2 * time.Millisecond) // slower, but answers
		})
		p := newProxy(t, WithUpstreams(bad, good), WithPolicy(PeakEWMA), WithEjection(0, 0, 0))
		addr := serve(t, b, p)
		c := httpClient()
		for i := 0; i < 100; i++ {
			resp, err := c.Get("http://" + addr + "/")
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		require.Less(t, badHits.Load(), int64(10), "the erring upstream got %d of 100", badHits.Load())
	})
}

// Hash: one key, one upstream; removing an upstream moves only its keys.
func TestHashPolicy(t *testing.T) {
	names := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"}
	p := newProxy(t, WithUpstreams(names...), WithHashKey(HeaderKey("X-User")))
	owner := map[string]string{}
	counts := map[string]int{}
	for i := 0; i < 4000; i++ {
		k := fmt.Sprintf("user-%d", i)
		u := p.pick(p.ups.load(), 0, []byte(k), nil)
		require.Same(t, u, p.pick(p.ups.load(), 0, []byte(k), nil))
		owner[k] = u.name
		counts[u.name]++
	}
	for _, n := range names {
		require.InDelta(t, 1000, counts[n], 300, "spread: %v", counts)
	}
	require.NoError(t, p.Remove(names[1]))
	moved := 0
	for k, was := range owner {
		now := p.pick(p.ups.load(), 0, []byte(k), nil).name
		if now != was {
			moved++
			require.Equal(t, names[1], was, "only the removed upstream's keys move")
		}
	}
	require.Equal(t, counts[names[1]], moved)
}

// Active health checks take a failing upstream out (503 when it is the
// only one) and put it back once it passes again.
func TestHealthChecks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var healthy atomic.Bool
		up := stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) {
			if r.URL.Path == "/healthz" && !healthy.Load() {
				w.WriteHeader(503)
				return
			}
			w.Write([]byte("ok"))
		})
		p := newProxy(t, WithUpstreams(up), WithHealthCheck(HealthCheck{
			Path: "/healthz", Interval: 20 * time.Millisecond, Timeout: 20 * time.Millisecond, Healthy: 2, Unhealthy: 2,
		}))
		addr := serve(t, b, p)
		c := httpClient()
		code, _ := get(t, c, "http://"+addr+"/") // starts the checks on the proxy's loop
		require.Equal(t, 200, code)
		require.Eventually(t, func() bool { return p.Stats().Upstreams[0].State == "down" }, 5*time.Second, 5*time.Millisecond)
		code, _ = get(t, c, "http://"+addr+"/")
		require.Equal(t, 503, code)
		healthy.Store(true)
		require.Eventually(t, func() bool { return p.Stats().Upstreams[0].State == "up" }, 5*time.Second, 5*time.Millisecond)
		code, _ = get(t, c, "http://"+addr+"/")
		require.Equal(t, 200, code)
	})
}

// A health check against an upstream that never answers fails at the
// check's timeout.
func TestHealthCheckTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := rawUpstream(t, func(r *nethttp.Request) ([]byte, bool) {
			if r.URL.Path == "/healthz" {
				return nil, false
			}
			return []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), false
		})
		p := newProxy(t, WithUpstreams(up), WithHealthCheck(HealthCheck{
			Path: "/healthz", Interval: 30 * time.Millisecond, Timeout: 20 * time.Millisecond, Unhealthy: 2,
		}))
		addr := serve(t, b, p)
		code, _ := get(t, httpClient(), "http://"+addr+"/")
		require.Equal(t, 200, code)
		require.Eventually(t, func() bool { return p.Stats().Upstreams[0].State == "down" }, 5*time.Second, 5*time.Millisecond)
	})
}

// Each ejection in a row doubles the cooldown, up to the maximum; a
// success after the return resets the streak.
func TestEjectionCooldownGrows(t *testing.T) {
	p := newProxy(t, WithUpstreams("127.0.0.1:1"), WithEjection(2, time.Second, 3*time.Second))
	u := testSet(t, p)[0]
	now := int64(time.Hour)
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}
	for _, cool := range want {
		p.failed(u, now)
		require.True(t, u.available(now), "one failure is not enough")
		p.failed(u, now)
		require.False(t, u.available(now))
		require.Equal(t, now+int64(cool), u.ejectedUntil.Load())
		now += int64(cool)
		require.True(t, u.available(now))
	}
	p.succeeded(u, now)
	p.failed(u, now)
	p.failed(u, now)
	require.Equal(t, now+int64(time.Second), u.ejectedUntil.Load(), "streak reset by a success")
}

// Through the proxy: one cookie value keeps going to one upstream.
func TestHashCookieAffinity(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var ups []string
		for i := 0; i < 3; i++ {
			ups = append(ups, stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) { fmt.Fprint(w, i) }))
		}
		p := newProxy(t, WithUpstreams(ups...), WithHashKey(CookieKey("session")))
		addr := serve(t, b, p)
		c := httpClient()
		seen := map[string]bool{}
		for s := 0; s < 20; s++ {
			first := ""
			for i := 0; i < 3; i++ {
				req, _ := nethttp.NewRequest("GET", "http://"+addr+"/", nil)
				req.Header.Set("Cookie", fmt.Sprintf("theme=dark; session=s%d", s))
				resp, err := c.Do(req)
				require.NoError(t, err)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if i == 0 {
					first = string(body)
				}
				require.Equal(t, first, string(body), "session s%d moved", s)
			}
			seen[first] = true
		}
		require.Len(t, seen, 3, "20 sessions spread over the 3 upstreams")
	})
}
