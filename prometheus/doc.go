// Package prometheus exports veloq's counters to Prometheus: it provides
// prometheus.Collector values (github.com/prometheus/client_golang) that
// read the Stats of a server at every scrape.
//
//   - NewNetCollector: a *net.Server's per-loop counters (connections,
//     bytes, loop activity, blocked callbacks, pending output and input
//     peaks, TLS handshakes), one series per loop, labelled loop="N".
//   - NewHTTPCollector: a *http.Server's request, connection and HTTP/2
//     counters, and the per-loop series of the loops under it. It takes
//     the http.Server itself and may be registered at any time: before
//     Listen (or ListenAndServe) it reports zeros (NewServer has started
//     the loops, which report their own zeros).
//   - NewRequestCollector: requests by route (the Router pattern), method
//     and status class, with a duration histogram, counted by its Observe
//     as the server's completion hook (http.WithCompletion), alone or
//     chained with http.AccessLog by http.ChainCompletion. Observe runs on
//     the loop and takes no lock once a series exists.
//   - NewWebSocketCollector: a *websocket.Upgrader's connection counters;
//     NewGroupCollector: a *websocket.Group's broadcast counters.
//   - NewProxyCollector: a reverse proxy's (package http/proxy) counters,
//     per upstream with an upstream="<address>" label, and its HTTP
//     client's pool per upstream.
//
// Every metric is named veloq_<subsystem>_<name>, with its unit in the
// name and _total on counters, as Prometheus's naming conventions ask;
// counters are exported as counters and levels (open connections, peaks,
// bytes held) as gauges. A nil server is refused (a panic) where the
// collector is made, never at a scrape. WithConstLabels tells apart two servers of the
// same kind registered in one registry.
//
// It is a module of its own (github.com/veloq/veloq/prometheus), so that
// client_golang and its dependencies never enter veloq's go.mod. Import it
// under another name, since client_golang's package is also prometheus:
//
//	import vprom "github.com/veloq/veloq/prometheus"
package prometheus
