package prometheus

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	vnet "github.com/veloq/veloq/net"
)

// netMetrics are the per-loop series of vnet.Stats, in its field order.
var netMetrics = []spec[vnet.Stats]{
	gauge("connections", "Connections open on the loop now.", func(s vnet.Stats) float64 { return lvl(s.Conns) }),
	counter("accepted_connections_total", "Connections the loop accepted.", func(s vnet.Stats) float64 { return cnt(s.Accepted) }),
	counter("dialed_connections_total", "Outbound connections the loop started.", func(s vnet.Stats) float64 { return cnt(s.Dialed) }),
	counter("closed_connections_total", "Connections the loop finalized.", func(s vnet.Stats) float64 { return cnt(s.Closed) }),
	counter("received_bytes_total", "Bytes received on the loop's connections.", func(s vnet.Stats) float64 { return cnt(s.BytesIn) }),
	counter("sent_bytes_total", "Bytes sent on the loop's connections.", func(s vnet.Stats) float64 { return cnt(s.BytesOut) }),
	counter("loop_iterations_total", "Iterations of the event loop.", func(s vnet.Stats) float64 { return cnt(s.Iterations) }),
	counter("loop_parks_total", "Times the loop blocked waiting for events.", func(s vnet.Stats) float64 { return cnt(s.Parks) }),
	counter("loop_wakeups_total", "Times another goroutine woke the parked loop.", func(s vnet.Stats) float64 { return cnt(s.Wakeups) }),
	counter("loop_posts_total", "Closures posted to the loop from other goroutines.", func(s vnet.Stats) float64 { return cnt(s.Posts) }),
	counter("loop_completions_total", "Backend events or completions the loop dispatched.", func(s vnet.Stats) float64 { return cnt(s.Completions) }),
	counter("handler_panics_total", "Handler panics the loop recovered.", func(s vnet.Stats) float64 { return cnt(s.Panics) }),
	counter("blocked_callbacks_total", "Callbacks that ran past the loop's block threshold, stalling its other connections.", func(s vnet.Stats) float64 { return cnt(s.Blocked) }),
	counter("accept_errors_total", "Accept failures (EMFILE and the like).", func(s vnet.Stats) float64 { return cnt(s.AcceptErrs) }),
	counter("spliced_bytes_total", "Bytes moved by splice (also counted as received and sent).", func(s vnet.Stats) float64 { return cnt(s.Spliced) }),
	counter("in_place_sent_bytes_total", "Bytes ForwardTo sent straight from io_uring receive buffers.", func(s vnet.Stats) float64 { return cnt(s.InPlace) }),
	gauge("held_receive_buffers", "io_uring receive buffers ForwardTo holds now.", func(s vnet.Stats) float64 { return lvl(s.HeldBufs) }),
	gauge("peak_connection_output_bytes", "Most output any one connection had pending (written, not yet taken by the kernel) since the loop started.", func(s vnet.Stats) float64 { return lvl(s.PeakConnOutput) }),
	gauge("peak_connection_input_bytes", "Most input any one connection had buffered (received, not yet consumed) since the loop started.", func(s vnet.Stats) float64 { return lvl(s.PeakConnInput) }),
	gauge("cached_bytes", "Bytes the loop's buffer cache keeps for reuse.", func(s vnet.Stats) float64 { return lvl(s.CachedBytes) }),
	counter("tls_handshakes_total", "TLS handshakes completed.", func(s vnet.Stats) float64 { return cnt(s.TLSHandshakes) }),
	counter("tls_handshake_errors_total", "Connections closed because the peer's TLS handshake or records failed.", func(s vnet.Stats) float64 { return cnt(s.TLSHandshakeErrors) }),
	counter("tls_handshake_timeouts_total", "TLS handshakes cut at the handshake timeout.", func(s vnet.Stats) float64 { return cnt(s.TLSHandshakeTimeouts) }),
	counter("tls_refused_connections_total", "New connections refused past the bound on concurrent TLS handshakes.", func(s vnet.Stats) float64 { return cnt(s.TLSRefused) }),
	counter("drained_connections_total", "Connections that ended during a graceful Shutdown before its deadline.", func(s vnet.Stats) float64 { return cnt(s.Drained) }),
	counter("cut_connections_total", "Connections a graceful Shutdown closed at its deadline.", func(s vnet.Stats) float64 { return cnt(s.Cut) }),
}

// NetCollector is a prometheus.Collector for a *net.Server: each loop's
// Stats as series of the veloq_net_ family, labelled loop="N" (the loop's
// index), plus veloq_net_loop_info{loop, backend} = 1 naming the loop's
// backend. Make one with NewNetCollector. For the loops of an HTTP server,
// NewHTTPCollector exports the same series.
type NetCollector struct {
	srv *vnet.Server
	net netSeries
}

// NewNetCollector returns a collector reading s.Stats at every scrape.
// Register it once per server (with WithConstLabels to tell servers apart).
// It panics if s is nil: an http.Server's NetServer is nil until it
// listens, and NewHTTPCollector, which takes the http.Server, covers its
// loops at any time.
func NewNetCollector(s *vnet.Server, opts ...Option) *NetCollector {
	if s == nil {
		panic("vprom: NewNetCollector of a nil *net.Server (for an http.Server, use NewHTTPCollector)")
	}
	return &NetCollector{srv: s, net: newNetSeries(newOptions(opts))}
}

// Describe sends the descriptors of every metric the collector exports.
func (c *NetCollector) Describe(ch chan<- *prometheus.Desc) { c.net.describe(ch) }

// Collect reads the server's Stats and sends one sample per metric and loop.
func (c *NetCollector) Collect(ch chan<- prometheus.Metric) { c.net.collect(c.srv, ch) }

// netSeries are the per-loop series of a net.Server, for NetCollector and
// HTTPCollector.
type netSeries struct {
	metrics []metric[vnet.Stats]
	info    *prometheus.Desc
}

func newNetSeries(o options) netSeries {
	return netSeries{
		metrics: build("net", netMetrics, []string{"loop"}, o),
		info: prometheus.NewDesc("veloq_net_loop_info", "The loop's backend (uring or epoll), as a label; the value is always 1.",
			[]string{"loop", "backend"}, o.constLabels),
	}
}

func (n *netSeries) describe(ch chan<- *prometheus.Desc) {
	ch <- n.info
	describe(n.metrics, ch)
}

// collect sends s's series, one per metric and loop.
func (n *netSeries) collect(s *vnet.Server, ch chan<- prometheus.Metric) {
	for _, st := range s.Stats() {
		loop := strconv.Itoa(st.ID)
		collect(n.metrics, st, ch, loop)
		pm, err := prometheus.NewConstMetric(n.info, prometheus.GaugeValue, 1, loop, string(st.Backend))
		if err != nil {
			pm = prometheus.NewInvalidMetric(n.info, err)
		}
		ch <- pm
	}
}
