// Package prometheus exports veloq's counters to Prometheus: it provides
// prometheus.Collector values (github.com/prometheus/client_golang) that
// read the Stats of a server at every scrape.
//
//   - NewNetCollector: a *net.Server's per-loop counters (connections,
//     bytes, loop activity, blocked callbacks, pending output and input
//     peaks, TLS handshakes), one series per loop, labelled loop="N".
//   - NewHTTPCollector: a *http.Server's request and connection counters.
//   - NewWebSocketCollector: a *websocket.Upgrader's connection counters;
//     NewGroupCollector: a *websocket.Group's broadcast counters.
//
// Every metric is named veloq_<subsystem>_<name>, with its unit in the
// name and _total on counters, as Prometheus's naming conventions ask;
// counters are exported as counters and levels (open connections, peaks,
// bytes held) as gauges. WithConstLabels tells apart two servers of the
// same kind registered in one registry.
//
// It is a module of its own (github.com/veloq/veloq/prometheus), so that
// client_golang and its dependencies never enter veloq's go.mod. Import it
// under another name, since client_golang's package is also prometheus:
//
//	import vprom "github.com/veloq/veloq/prometheus"
package prometheus
