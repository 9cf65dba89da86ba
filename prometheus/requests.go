package prometheus

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	vhttp "github.com/veloq/veloq/http"
)

// DefaultDurationBuckets are the request duration histogram's upper
// bounds in seconds: from 100 µs, since an inline handler answers in
// microseconds, to 10 s.
var DefaultDurationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// RequestCollector counts an http.Server's requests by route, method and
// status class, with their durations, from the server's completion hook:
// the histogram veloq_http_request_duration_seconds{route, method,
// class}, whose _count is the number of requests. route is the Router
// pattern that matched ("" for none), method one of the standard methods
// or "OTHER" (a client cannot make series up), class "1xx" to "5xx", or
// "none" for a request that got no answer. Give its Observe to
// vhttp.WithCompletion, alone or chained with an access log:
//
//	reqs := vprom.NewRequestCollector()
//	srv, err := vhttp.NewServer(h, vhttp.WithCompletion(vhttp.ChainCompletion(vhttp.AccessLog(logger), reqs.Observe)))
//	reg.MustRegister(vprom.NewHTTPCollector(srv), reqs)
//
// Servers may share one RequestCollector (their requests add up) or each
// have its own, told apart by WithConstLabels.
type RequestCollector struct {
	hist *prometheus.HistogramVec

	// routes maps a route to its series, copied on write: Observe reads
	// it with one atomic load and no lock; mu orders the writers.
	routes atomic.Pointer[map[string]*routeSeries]
	mu     sync.Mutex
}

// routeSeries holds one route's histograms, made on first use, by
// method and class index.
type routeSeries struct {
	cells [len(methods) + 1][len(classes)]atomic.Pointer[observer]
}

type observer struct{ prometheus.Observer }

// methods are the methods with series of their own; any other is "OTHER"
// (index len(methods)).
var methods = [...]string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"}

// classes are the status classes by status/100, "none" for 0 (and any
// status outside 100..599).
var classes = [...]string{"none", "1xx", "2xx", "3xx", "4xx", "5xx"}

// WithDurationBuckets sets a RequestCollector's histogram upper bounds in
// seconds, increasing (default DefaultDurationBuckets). Other collectors
// ignore it.
func WithDurationBuckets(b []float64) Option {
	return func(o *options) { o.buckets = append([]float64(nil), b...) }
}

// NewRequestCollector returns a collector whose Observe counts requests.
func NewRequestCollector(opts ...Option) *RequestCollector {
	o := newOptions(opts)
	if o.buckets == nil {
		o.buckets = DefaultDurationBuckets
	}
	c := &RequestCollector{hist: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace:   "veloq",
		Subsystem:   "http",
		Name:        "request_duration_seconds",
		Help:        "Time from a request's head arriving to its answer ending, by route (Router pattern), method and status class.",
		Buckets:     o.buckets,
		ConstLabels: o.constLabels,
	}, []string{"route", "method", "class"})}
	c.routes.Store(&map[string]*routeSeries{})
	return c
}

// Observe counts the request d describes: a completion hook for
// vhttp.WithCompletion. It runs on the server's loop, so it takes no lock
// once the request's series exists: a map read under an atomic load, an
// array index for method and class, and the histogram's atomic Observe.
func (c *RequestCollector) Observe(d *vhttp.Completion) {
	rs := (*c.routes.Load())[d.Route]
	if rs == nil {
		rs = c.route(d.Route)
	}
	m, k := methodIndex(d.Method), classIndex(d.Status)
	o := rs.cells[m][k].Load()
	if o == nil {
		o = c.cell(rs, d.Route, m, k)
	}
	o.Observe(d.Duration.Seconds())
}

// route returns route's series, adding them to a copy of the map.
func (c *RequestCollector) route(route string) *routeSeries {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.routes.Load()
	if rs := old[route]; rs != nil {
		return rs
	}
	m := make(map[string]*routeSeries, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	rs := new(routeSeries)
	m[route] = rs
	c.routes.Store(&m)
	return rs
}

// cell makes the histogram of (route, method m, class k).
func (c *RequestCollector) cell(rs *routeSeries, route string, m, k int) *observer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := rs.cells[m][k].Load(); o != nil {
		return o
	}
	method := "OTHER"
	if m < len(methods) {
		method = methods[m]
	}
	o := &observer{c.hist.WithLabelValues(route, method, classes[k])}
	rs.cells[m][k].Store(o)
	return o
}

func methodIndex(m string) int {
	for i, s := range methods {
		if s == m {
			return i
		}
	}
	return len(methods)
}

func classIndex(status int) int {
	if status < 100 || status > 599 {
		return 0
	}
	return status / 100
}

// Describe sends the histogram's descriptor.
func (c *RequestCollector) Describe(ch chan<- *prometheus.Desc) { c.hist.Describe(ch) }

// Collect sends every (route, method, class) histogram observed so far.
func (c *RequestCollector) Collect(ch chan<- prometheus.Metric) { c.hist.Collect(ch) }
