package prometheus

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Option configures a collector.
type Option func(*options)

type options struct {
	constLabels prometheus.Labels
	buckets     []float64 // RequestCollector's
}

// WithConstLabels adds labels with fixed values to every metric of the
// collector, e.g. {"server": "api"}, so that two servers of the same kind
// can be registered in one registry. None by default. The names "loop"
// and "backend" are used by the net collector's own labels.
func WithConstLabels(l prometheus.Labels) Option {
	return func(o *options) {
		o.constLabels = make(prometheus.Labels, len(l))
		for k, v := range l {
			o.constLabels[k] = v
		}
	}
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// metric is one exported series family: how to read its value from a
// snapshot S of a server's counters.
type metric[S any] struct {
	desc  *prometheus.Desc
	typ   prometheus.ValueType
	value func(S) float64
}

// spec declares a metric before its Desc is made: name without the
// veloq_<subsystem>_ prefix, help text, type and value.
type spec[S any] struct {
	name  string
	help  string
	typ   prometheus.ValueType
	value func(S) float64
}

// counter and gauge declare a counter and a gauge.
func counter[S any](name, help string, v func(S) float64) spec[S] {
	return spec[S]{name, help, prometheus.CounterValue, v}
}

func gauge[S any](name, help string, v func(S) float64) spec[S] {
	return spec[S]{name, help, prometheus.GaugeValue, v}
}

// build makes the Descs of specs under veloq_<subsystem>_, with the
// variable labels and the options' constant labels.
func build[S any](subsystem string, specs []spec[S], labels []string, o options) []metric[S] {
	out := make([]metric[S], len(specs))
	for i, s := range specs {
		out[i] = metric[S]{
			desc:  prometheus.NewDesc(prometheus.BuildFQName("veloq", subsystem, s.name), s.help, labels, o.constLabels),
			typ:   s.typ,
			value: s.value,
		}
	}
	return out
}

// describe sends every Desc of ms.
func describe[S any](ms []metric[S], ch chan<- *prometheus.Desc) {
	for _, m := range ms {
		ch <- m.desc
	}
}

// collect sends every metric of ms for the snapshot st with the label
// values. A metric that cannot be made (labels that do not fit the Desc)
// is sent as an invalid metric, which the registry reports as a gather
// error, instead of panicking in the scrape.
func collect[S any](ms []metric[S], st S, ch chan<- prometheus.Metric, labels ...string) {
	for _, m := range ms {
		pm, err := prometheus.NewConstMetric(m.desc, m.typ, m.value(st), labels...)
		if err != nil {
			pm = prometheus.NewInvalidMetric(m.desc, err)
		}
		ch <- pm
	}
}

// cnt and lvl convert a counter and a level to a sample value.
func cnt(v uint64) float64 { return float64(v) }
func lvl(v int64) float64  { return float64(v) }

// Every collector is a prometheus.Collector.
var (
	_ prometheus.Collector = (*NetCollector)(nil)
	_ prometheus.Collector = (*HTTPCollector)(nil)
	_ prometheus.Collector = (*RequestCollector)(nil)
	_ prometheus.Collector = (*WebSocketCollector)(nil)
	_ prometheus.Collector = (*GroupCollector)(nil)
)
