package prometheus

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veloq/veloq/http/client"
	"github.com/veloq/veloq/http/proxy"
)

// proxyMetrics are the proxy-wide series of proxy.Stats.
var proxyMetrics = []spec[proxy.Stats]{
	gauge("in_flight_requests", "Requests being forwarded now.", func(s proxy.Stats) float64 { return lvl(s.InFlight) }),
	counter("no_upstream_total", "Requests answered 503: no upstream was available.", func(s proxy.Stats) float64 { return cnt(s.NoUpstream) }),
	counter("retries_denied_total", "Retries the retry budget refused.", func(s proxy.Stats) float64 { return cnt(s.RetriesDenied) }),
	counter("upstream_pauses_total", "Times an upstream was paused because its client was more than the buffer limit behind.", func(s proxy.Stats) float64 { return cnt(s.Paused) }),
	counter("upgrades_total", "Tunnels opened after an upstream's 101 (WebSocket and other Upgrade requests).", func(s proxy.Stats) float64 { return cnt(s.Upgrades) }),
	gauge("tunnels", "Tunnels open now.", func(s proxy.Stats) float64 { return lvl(s.Tunnels) }),
}

// upstreamMetrics are the series of one proxy.UpstreamStats, labelled
// upstream="<address>". Errors and answers by class are exported below,
// with a class label.
var upstreamMetrics = []spec[proxy.UpstreamStats]{
	gauge("upstream_in_flight_requests", "Requests in flight to the upstream now.", func(s proxy.UpstreamStats) float64 { return lvl(s.InFlight) }),
	counter("upstream_requests_total", "Attempts sent to the upstream, retries included.", func(s proxy.UpstreamStats) float64 { return cnt(s.Requests) }),
	counter("upstream_retries_total", "Attempts that retried on the upstream a request that failed on another.", func(s proxy.UpstreamStats) float64 { return cnt(s.Retries) }),
	counter("upstream_ejections_total", "Passive ejections of the upstream.", func(s proxy.UpstreamStats) float64 { return cnt(s.Ejections) }),
	counter("upstream_new_connections_total", "Connections made to the upstream.", func(s proxy.UpstreamStats) float64 { return cnt(s.NewConns) }),
	counter("upstream_pool_hits_total", "Requests sent to the upstream on a pooled connection.", func(s proxy.UpstreamStats) float64 { return cnt(s.ReusedConns) }),
	gauge("upstream_latency_ewma_seconds", "Peak-EWMA latency of the upstream (PeakEWMA policy only; 0 otherwise).", func(s proxy.UpstreamStats) float64 { return s.LatencyEWMA.Seconds() }),
	gauge("upstream_up", "1 while the upstream takes requests, 0 while ejected, down (health checks) or draining.", func(s proxy.UpstreamStats) float64 {
		if s.State == "up" {
			return 1
		}
		return 0
	}),
}

// errorClasses and answerClasses name the classes of UpstreamStats.
var (
	errorClasses = []struct {
		name string
		v    func(proxy.UpstreamStats) uint64
	}{
		{"connect", func(s proxy.UpstreamStats) uint64 { return s.ConnectErrors }},
		{"reset", func(s proxy.UpstreamStats) uint64 { return s.ResetErrors }},
		{"timeout", func(s proxy.UpstreamStats) uint64 { return s.Timeouts }},
		{"bad_response", func(s proxy.UpstreamStats) uint64 { return s.BadResponses }},
		{"canceled", func(s proxy.UpstreamStats) uint64 { return s.Canceled }},
	}
	answerClasses = []struct {
		name string
		v    func(proxy.UpstreamStats) uint64
	}{
		{"4xx", func(s proxy.UpstreamStats) uint64 { return s.Status4xx }},
		{"5xx", func(s proxy.UpstreamStats) uint64 { return s.Status5xx }},
	}
)

// clientMetrics are the series of one client.UpstreamStats: the
// forwarding client's pool for one upstream, labelled upstream and tls.
var clientMetrics = []spec[client.UpstreamStats]{
	counter("client_requests_total", "Calls the client sent to the upstream.", func(s client.UpstreamStats) float64 { return cnt(s.Requests) }),
	counter("client_new_connections_total", "Connections the client dialed to the upstream.", func(s client.UpstreamStats) float64 { return cnt(s.NewConns) }),
	counter("client_reused_connections_total", "Calls sent on a pooled connection.", func(s client.UpstreamStats) float64 { return cnt(s.ReusedConns) }),
	counter("client_retries_total", "Calls retried on a fresh connection after a reused one failed.", func(s client.UpstreamStats) float64 { return cnt(s.Retries) }),
	counter("client_errors_total", "Calls that ended with an error.", func(s client.UpstreamStats) float64 { return cnt(s.Errs) }),
	gauge("client_open_connections", "Connections to the upstream open or dialing now.", func(s client.UpstreamStats) float64 { return float64(s.Open) }),
	gauge("client_idle_connections", "Idle pooled connections to the upstream now.", func(s client.UpstreamStats) float64 { return float64(s.Idle) }),
	gauge("client_queued_calls", "Calls waiting for a connection to the upstream now.", func(s client.UpstreamStats) float64 { return float64(s.Queued) }),
}

// ProxyCollector is a prometheus.Collector for a *proxy.Proxy (package
// http/proxy): its Stats as series of the veloq_proxy_ family, per
// upstream with an upstream label (the address as the proxy names it),
// and its client's per-upstream pool figures (veloq_proxy_client_...,
// labelled upstream and tls). Make one with NewProxyCollector.
type ProxyCollector struct {
	p       *proxy.Proxy
	metrics []metric[proxy.Stats]
	ups     []metric[proxy.UpstreamStats]
	client  []metric[client.UpstreamStats]
	errors  *prometheus.Desc
	answers *prometheus.Desc
}

// NewProxyCollector returns a collector reading p.Stats at every scrape.
// It panics if p is nil, so that the mistake shows where the collector
// is made, not at every scrape. An upstream removed from the proxy stops
// being exported; its client pool's series stay (the client keeps them).
func NewProxyCollector(p *proxy.Proxy, opts ...Option) *ProxyCollector {
	if p == nil {
		panic("vprom: NewProxyCollector of a nil *proxy.Proxy")
	}
	o := newOptions(opts)
	up := []string{"upstream"}
	cls := []string{"upstream", "class"}
	return &ProxyCollector{
		p:       p,
		metrics: build("proxy", proxyMetrics, nil, o),
		ups:     build("proxy", upstreamMetrics, up, o),
		client:  build("proxy", clientMetrics, []string{"upstream", "tls"}, o),
		errors: prometheus.NewDesc("veloq_proxy_upstream_errors_total",
			"Failed attempts to the upstream by class: connect, reset, timeout, bad_response, canceled (the client left).", cls, o.constLabels),
		answers: prometheus.NewDesc("veloq_proxy_upstream_responses_total",
			"Upstream answers by status class (4xx, 5xx).", cls, o.constLabels),
	}
}

// Describe sends the descriptors of every metric the collector exports.
func (c *ProxyCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(c.metrics, ch)
	describe(c.ups, ch)
	describe(c.client, ch)
	ch <- c.errors
	ch <- c.answers
}

// Collect reads the proxy's Stats once and sends its samples.
func (c *ProxyCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.p.Stats()
	collect(c.metrics, st, ch)
	for _, u := range st.Upstreams {
		collect(c.ups, u, ch, u.Addr)
		for _, k := range errorClasses {
			ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, cnt(k.v(u)), u.Addr, k.name)
		}
		for _, k := range answerClasses {
			ch <- prometheus.MustNewConstMetric(c.answers, prometheus.CounterValue, cnt(k.v(u)), u.Addr, k.name)
		}
	}
	for _, u := range st.Client.Upstreams {
		collect(c.client, u, ch, u.Addr, strconv.FormatBool(u.TLS))
	}
}

var _ prometheus.Collector = (*ProxyCollector)(nil)
