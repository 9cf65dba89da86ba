package prometheus

import (
	"github.com/prometheus/client_golang/prometheus"

	vhttp "github.com/veloq/veloq/http"
)

// httpMetrics are the series of vhttp.Stats, in its field order. The HTTP
// server sums its counters over its loops, so they carry no loop label;
// the per-loop transport figures follow as the veloq_net_ series.
var httpMetrics = []spec[vhttp.Stats]{
	gauge("connections", "HTTP connections open now.", func(s vhttp.Stats) float64 { return lvl(s.Conns) }),
	counter("accepted_connections_total", "HTTP connections accepted.", func(s vhttp.Stats) float64 { return cnt(s.Accepted) }),
	counter("rejected_connections_total", "Connections refused by the connection limit.", func(s vhttp.Stats) float64 { return cnt(s.Rejected) }),
	counter("requests_total", "Requests handled (responses written).", func(s vhttp.Stats) float64 { return cnt(s.Requests) }),
	counter("offloaded_requests_total", "Requests handled off the loop.", func(s vhttp.Stats) float64 { return cnt(s.Offloaded) }),
	counter("protocol_errors_total", "Requests the parser rejected.", func(s vhttp.Stats) float64 { return cnt(s.ProtoErrors) }),
	counter("handler_panics_total", "Handler panics recovered.", func(s vhttp.Stats) float64 { return cnt(s.Panics) }),
	counter("timeouts_total", "Connections closed by a timeout.", func(s vhttp.Stats) float64 { return cnt(s.Timeouts) }),
	counter("hijacked_connections_total", "Connections handed to another handler by Hijack.", func(s vhttp.Stats) float64 { return cnt(s.Hijacked) }),
	counter("over_budget_requests_total", "Requests refused with 503 because buffered bodies were over budget.", func(s vhttp.Stats) float64 { return cnt(s.OverBudget) }),
	gauge("buffered_body_bytes", "Request body buffer capacity all connections hold now.", func(s vhttp.Stats) float64 { return lvl(s.BufferedBodyBytes) }),
	counter("http2_connections_total", "Connections that spoke HTTP/2.", func(s vhttp.Stats) float64 { return cnt(s.HTTP2Conns) }),
	counter("http2_streams_total", "HTTP/2 streams opened.", func(s vhttp.Stats) float64 { return cnt(s.HTTP2Streams) }),
	counter("http2_stream_resets_total", "HTTP/2 streams the server reset (stream errors).", func(s vhttp.Stats) float64 { return cnt(s.HTTP2Resets) }),
	counter("http2_refused_streams_total", "HTTP/2 streams refused over the concurrency bound.", func(s vhttp.Stats) float64 { return cnt(s.HTTP2Refused) }),
	counter("http2_calm_connections_total", "HTTP/2 connections ended with ENHANCE_YOUR_CALM (floods, rapid reset, oversized header blocks).", func(s vhttp.Stats) float64 { return cnt(s.HTTP2Calm) }),
	counter("drained_connections_total", "HTTP connections that ended during Shutdown before its deadline.", func(s vhttp.Stats) float64 { return cnt(s.Drained) }),
	counter("cut_connections_total", "HTTP connections cut at Shutdown's deadline or by Close.", func(s vhttp.Stats) float64 { return cnt(s.Cut) }),
}

// HTTPCollector is a prometheus.Collector for a *http.Server: its Stats
// as series of the veloq_http_ family, and the loops under it as the
// veloq_net_ series a NetCollector exports. It works whenever it is
// registered: before Listen the counters, the loops' included, are zeros;
// afterwards they are the live figures, so it can be registered
// right after NewServer, before a ListenAndServe. Make one with
// NewHTTPCollector. Requests by route, method and status class come from
// a RequestCollector.
type HTTPCollector struct {
	srv     *vhttp.Server
	metrics []metric[vhttp.Stats]
	net     netSeries
}

// NewHTTPCollector returns a collector reading s.Stats (and its loops'
// Stats, once it listens) at every scrape. It panics if s is nil, so that
// the mistake shows where the collector is made, not at every scrape.
// Do not register a NewNetCollector(s.NetServer()) beside it: it already
// exports those series, and the registry would refuse the second.
func NewHTTPCollector(s *vhttp.Server, opts ...Option) *HTTPCollector {
	if s == nil {
		panic("vprom: NewHTTPCollector of a nil *http.Server")
	}
	o := newOptions(opts)
	return &HTTPCollector{srv: s, metrics: build("http", httpMetrics, nil, o), net: newNetSeries(o)}
}

// Describe sends the descriptors of every metric the collector exports.
func (c *HTTPCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(c.metrics, ch)
	c.net.describe(ch)
}

// Collect reads the server's Stats and sends one sample per metric, and
// the loops' series once the server listens.
func (c *HTTPCollector) Collect(ch chan<- prometheus.Metric) {
	collect(c.metrics, c.srv.Stats(), ch)
	if ns := c.srv.NetServer(); ns != nil {
		c.net.collect(ns, ch)
	}
}
