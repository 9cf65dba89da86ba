package prometheus

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veloq/veloq/websocket"
)

// websocketMetrics are the series of websocket.Stats, in its field order.
var websocketMetrics = []spec[websocket.Stats]{
	counter("upgrades_total", "Handshakes answered with 101.", func(s websocket.Stats) float64 { return cnt(s.Upgrades) }),
	counter("rejected_upgrades_total", "Upgrade requests answered with 4xx or 500.", func(s websocket.Stats) float64 { return cnt(s.Rejected) }),
	gauge("connections", "WebSocket connections open now.", func(s websocket.Stats) float64 { return lvl(s.Open) }),
	counter("closed_by_peer_total", "Connections whose peer started the close handshake.", func(s websocket.Stats) float64 { return cnt(s.ClosedByPeer) }),
	counter("closed_locally_total", "Connections closed by a local Close.", func(s websocket.Stats) float64 { return cnt(s.ClosedLocally) }),
	counter("protocol_errors_total", "Connections failed with close code 1002, 1007 or 1009.", func(s websocket.Stats) float64 { return cnt(s.ProtocolErrors) }),
	counter("abnormal_closes_total", "Connections whose TCP ended without a close handshake.", func(s websocket.Stats) float64 { return cnt(s.Abnormal) }),
	counter("refused_messages_total", "Messages refused because the connection's pending output was over its limit.", func(s websocket.Stats) float64 { return cnt(s.OutputFull) }),
	counter("going_away_closes_total", "Close handshakes with 1001 (going away) the server's Shutdown started.", func(s websocket.Stats) float64 { return cnt(s.GoingAway) }),
	counter("drained_connections_total", "Connections that ended during the server's Shutdown before its deadline.", func(s websocket.Stats) float64 { return cnt(s.Drained) }),
	counter("cut_connections_total", "Connections cut at the server's Shutdown deadline.", func(s websocket.Stats) float64 { return cnt(s.Cut) }),
}

// groupMetrics are the series of websocket.GroupStats.
var groupMetrics = []spec[websocket.GroupStats]{
	gauge("group_members", "Connections in the broadcast group now.", func(s websocket.GroupStats) float64 { return float64(s.Members) }),
	counter("group_sent_messages_total", "Messages appended to a group member's output.", func(s websocket.GroupStats) float64 { return cnt(s.Sent) }),
	counter("group_skipped_members_total", "Members a broadcast skipped: closing, or over their pending output limit.", func(s websocket.GroupStats) float64 { return cnt(s.Skipped) }),
}

// WebSocketCollector is a prometheus.Collector for a *websocket.Upgrader:
// its Stats as series of the veloq_websocket_ family. Make one with
// NewWebSocketCollector.
type WebSocketCollector struct {
	u       *websocket.Upgrader
	metrics []metric[websocket.Stats]
}

// NewWebSocketCollector returns a collector reading u.Stats at every scrape.
func NewWebSocketCollector(u *websocket.Upgrader, opts ...Option) *WebSocketCollector {
	return &WebSocketCollector{u: u, metrics: build("websocket", websocketMetrics, nil, newOptions(opts))}
}

// Describe sends the descriptors of every metric the collector exports.
func (c *WebSocketCollector) Describe(ch chan<- *prometheus.Desc) { describe(c.metrics, ch) }

// Collect reads the upgrader's Stats and sends one sample per metric.
func (c *WebSocketCollector) Collect(ch chan<- prometheus.Metric) {
	collect(c.metrics, c.u.Stats(), ch)
}

// GroupCollector is a prometheus.Collector for a *websocket.Group: its
// Stats as series veloq_websocket_group_*. Give each group registered in
// one registry its own WithConstLabels. Make one with NewGroupCollector.
type GroupCollector struct {
	g       *websocket.Group
	metrics []metric[websocket.GroupStats]
}

// NewGroupCollector returns a collector reading g.Stats at every scrape.
func NewGroupCollector(g *websocket.Group, opts ...Option) *GroupCollector {
	return &GroupCollector{g: g, metrics: build("websocket", groupMetrics, nil, newOptions(opts))}
}

// Describe sends the descriptors of every metric the collector exports.
func (c *GroupCollector) Describe(ch chan<- *prometheus.Desc) { describe(c.metrics, ch) }

// Collect reads the group's Stats and sends one sample per metric.
func (c *GroupCollector) Collect(ch chan<- prometheus.Metric) { collect(c.metrics, c.g.Stats(), ch) }
