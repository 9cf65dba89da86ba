package prometheus

import (
	"github.com/prometheus/client_golang/prometheus"

	vhttp "github.com/veloq/veloq/http"
)

// httpMetrics are the series of vhttp.Stats, in its field order. The HTTP
// server sums its counters over its loops, so they carry no loop label;
// per-loop transport figures come from a NetCollector on NetServer.
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
}

// HTTPCollector is a prometheus.Collector for a *http.Server: its Stats
// as series of the veloq_http_ family. Make one with NewHTTPCollector.
type HTTPCollector struct {
	srv     *vhttp.Server
	metrics []metric[vhttp.Stats]
}

// NewHTTPCollector returns a collector reading s.Stats at every scrape.
// For the loops under it (bytes, blocked callbacks, TLS), register a
// NewNetCollector(s.NetServer()) too.
func NewHTTPCollector(s *vhttp.Server, opts ...Option) *HTTPCollector {
	return &HTTPCollector{srv: s, metrics: build("http", httpMetrics, nil, newOptions(opts))}
}

// Describe sends the descriptors of every metric the collector exports.
func (c *HTTPCollector) Describe(ch chan<- *prometheus.Desc) { describe(c.metrics, ch) }

// Collect reads the server's Stats and sends one sample per metric.
func (c *HTTPCollector) Collect(ch chan<- prometheus.Metric) { collect(c.metrics, c.srv.Stats(), ch) }
