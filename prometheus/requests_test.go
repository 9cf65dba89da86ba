package prometheus

import (
	"bytes"
	"context"
	"log/slog"
	nethttp "net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/executor"
	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// The README's recipe panicked at every scrape: the collector registered
// right after NewServer read NetServer's nil. The HTTP collector takes the
// server itself: before Listen it reports zeros, the loops' included, after it the
// live figures, loops included.
func TestHTTPCollectorBeforeListen(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		s, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) { w.WriteString("ok") }),
			vhttp.WithNetOptions(vnet.WithBackend(b), vnet.WithLoops(1)), vhttp.WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err)
		reg := register(t, NewHTTPCollector(s))
		text := scrape(t, reg)
		requireLines(t, text, "veloq_http_requests_total 0", "veloq_http_http2_streams_total 0",
			`veloq_net_accepted_connections_total{loop="0"} 0`)

		_, err = s.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s.Shutdown(ctx)
		})
		resp, err := nethttp.Get("http://" + s.Addr().String() + "/")
		require.NoError(t, err)
		resp.Body.Close()
		eventually(t, reg, "veloq_http_requests_total", equals(1), "one request")
		eventually(t, reg, "veloq_net_accepted_connections_total", equals(1), "the loop's series")
		requireLines(t, scrape(t, reg), `veloq_net_loop_info{backend="`+string(b)+`",loop="0"} 1`)
	})
}

// A nil server is refused where the collector is made, not at a scrape.
func TestCollectorsRefuseNil(t *testing.T) {
	require.PanicsWithValue(t, "vprom: NewHTTPCollector of a nil *http.Server", func() { NewHTTPCollector(nil) })
	require.Panics(t, func() { NewNetCollector(nil) })
}

// histograms gathers the request histogram by "route method class".
func histograms(t *testing.T, reg prometheus.Gatherer) map[string]*dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]*dto.Histogram{}
	for _, mf := range mfs {
		if mf.GetName() != "veloq_http_request_duration_seconds" {
			continue
		}
		require.Equal(t, dto.MetricType_HISTOGRAM, mf.GetType())
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["route"]+" "+l["method"]+" "+l["class"]] = m.GetHistogram()
		}
	}
	return out
}

// bucket is the cumulative count of h's bucket with upper bound le.
func bucket(t *testing.T, h *dto.Histogram, le float64) uint64 {
	t.Helper()
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	t.Fatalf("no bucket le=%v", le)
	return 0
}

// Requests are counted by route, method and class from the completion
// hook, chained with an access log, over both protocols: an offloaded
// 503 that took 200 ms falls in the buckets from 0.25 s, not below.
func TestRequestCollector(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		pool := executor.NewPool(executor.WithWorkers(1))
		t.Cleanup(func() { _ = pool.Shutdown(context.Background()) })
		r := vhttp.NewRouter()
		r.HandleFunc("GET /users/{id}", func(w *vhttp.ResponseWriter, r *vhttp.Request) { w.WriteString("user") })
		r.Handle("POST /slow", vhttp.Offloaded(pool, vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
			time.Sleep(200 * time.Millisecond) // the handler's work under test
			w.WriteHeader(vhttp.StatusServiceUnavailable)
		})))
		reqs := NewRequestCollector()
		var logs backendtest.Buffer
		s, err := vhttp.NewServer(r, vhttp.WithNetOptions(vnet.WithBackend(b), vnet.WithLoops(1)), vhttp.WithLogger(slog.New(slog.DiscardHandler)),
			vhttp.WithCompletion(vhttp.ChainCompletion(vhttp.AccessLog(slog.New(slog.NewJSONHandler(&logs, nil))), reqs.Observe)))
		require.NoError(t, err)
		reg := register(t, NewHTTPCollector(s))
		require.NoError(t, reg.Register(reqs))
		_, err = s.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s.Shutdown(ctx)
		})
		url := "http://" + s.Addr().String()
		h1 := &nethttp.Client{Timeout: 10 * time.Second}
		h2 := h2cClient()
		for _, path := range []string{"/users/1", "/users/2", "/nowhere"} {
			resp, err := h1.Get(url + path)
			require.NoError(t, err)
			resp.Body.Close()
		}
		resp, err := h2.Get(url + "/users/3")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 2, resp.ProtoMajor)
		resp, err = h1.Post(url+"/slow", "text/plain", strings.NewReader("x"))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 503, resp.StatusCode)
		resp, err = h1.Do(mustRequest(t, "BREW", url+"/users/1"))
		require.NoError(t, err)
		resp.Body.Close()

		require.Eventually(t, func() bool {
			var n uint64
			for _, h := range histograms(t, reg) {
				n += h.GetSampleCount()
			}
			return n == 6
		}, 5*time.Second, 2*time.Millisecond)
		hs := histograms(t, reg)
		require.Len(t, hs, 4, "%v", hs)
		require.EqualValues(t, 3, hs["GET /users/{id} GET 2xx"].GetSampleCount(), "two HTTP/1.1 and one HTTP/2")
		require.EqualValues(t, 1, hs[" GET 4xx"].GetSampleCount(), "no route: 404")
		require.EqualValues(t, 1, hs[" OTHER 4xx"].GetSampleCount(), "an unknown method makes no series of its own")
		slow := hs["POST /slow POST 5xx"]
		require.EqualValues(t, 1, slow.GetSampleCount())
		require.GreaterOrEqual(t, slow.GetSampleSum(), 0.2)
		require.EqualValues(t, 0, bucket(t, slow, 0.1))
		require.EqualValues(t, 1, bucket(t, slow, 0.25))

		eventually(t, reg, "veloq_http_http2_connections_total", equals(1), "one HTTP/2 connection")
		eventually(t, reg, "veloq_http_http2_streams_total", equals(1), "one stream")
		require.Equal(t, 6, bytes.Count([]byte(logs.String()), []byte("\n")), "the access log saw them too")
	})
}

func mustRequest(t *testing.T, method, url string) *nethttp.Request {
	t.Helper()
	req, err := nethttp.NewRequest(method, url, nil)
	require.NoError(t, err)
	return req
}

// h2cClient is Go's client speaking HTTP/2 with prior knowledge.
func h2cClient() *nethttp.Client {
	var p nethttp.Protocols
	p.SetUnencryptedHTTP2(true)
	return &nethttp.Client{Timeout: 10 * time.Second, Transport: &nethttp.Transport{Protocols: &p}}
}

// BenchmarkRequestObserve is Observe's cost on the loop for a series
// that exists: an atomic load, a map read, two array indexes and the
// histogram's atomic update.
func BenchmarkRequestObserve(b *testing.B) {
	c := NewRequestCollector()
	d := &vhttp.Completion{Method: "GET", Route: "GET /users/{id}", Status: 200, Duration: 300 * time.Microsecond}
	c.Observe(d)
	b.ReportAllocs()
	for b.Loop() {
		c.Observe(d)
	}
}
