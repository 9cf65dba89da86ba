package proxy

import (
	"math"
	"time"

	"github.com/veloq/veloq/http/client"
)

// Stats is a snapshot of a proxy's counters.
type Stats struct {
	Upstreams []UpstreamStats
	// InFlight is the number of requests being forwarded.
	InFlight int64
	// NoUpstream counts 503 answers: no upstream was available.
	NoUpstream uint64
	// RetriesDenied counts retries the retry budget refused.
	RetriesDenied uint64
	// Paused counts the times an upstream was paused because its client
	// was more than the buffer limit behind (backpressure).
	Paused uint64
	// BodyPaused counts the times a client's streamed request body was
	// paused because its upstream was more than the buffer limit behind.
	BodyPaused uint64
	// Upgrades counts the tunnels opened after an upstream's 101
	// (WebSocket and other Upgrade requests); Tunnels is how many are
	// open now.
	Upgrades uint64
	Tunnels  int64
	// Client is the forwarding client's own statistics (pools,
	// connections made and reused). Its Canceled counts the upstream
	// calls the proxy gave up: for clients that left (UpstreamStats'
	// Canceled), and for the proxy's own timeout or a malformed answer
	// (Timeouts, BadResponses); its Errors the calls that failed.
	Client client.Stats
}

// UpstreamStats are one upstream's counters.
type UpstreamStats struct {
	Addr string
	// State is "up", "ejected", "down" (failing health checks) or
	// "draining".
	State    string
	InFlight int64
	// Requests counts attempts sent to it, retries included; Retries
	// counts the attempts that were retries of a request that failed on
	// another upstream.
	Requests, Retries uint64
	// Errors by class: the upstream's failures, which count toward its
	// ejection. ConnectErrors: the connection could not be made;
	// ResetErrors: it closed or reset before the answer was whole;
	// Timeouts: the upstream was silent for WithTimeout (504);
	// BadResponses: a malformed answer.
	ConnectErrors, ResetErrors, Timeouts, BadResponses uint64
	// Status5xx and Status4xx count answers by class. Canceled counts
	// the attempts the proxy gave up because the client left (closed or
	// reset its connection, or its HTTP/2 stream, before the answer was
	// whole): not the upstream's failures, and in no error class. A load
	// generator that stops with requests in flight leaves one per
	// connection. Their upstream connections are kept when the answer's
	// rest is short, closed otherwise (client.Stats.Drained).
	Status5xx, Status4xx, Canceled uint64
	// Ejections counts passive ejections.
	Ejections uint64
	// NewConns and ReusedConns are the client's connections made to it
	// and requests sent on pooled ones (summed over loops).
	NewConns, ReusedConns uint64
	// LatencyEWMA is the peak-EWMA latency (kept by the PeakEWMA policy
	// only; zero otherwise).
	LatencyEWMA time.Duration
}

// Stats returns the proxy's counters. It may be called from any
// goroutine.
func (p *Proxy) Stats() Stats {
	now := since(time.Now())
	s := Stats{
		InFlight:      p.live.Load(),
		NoUpstream:    p.noUpstream.Load(),
		RetriesDenied: p.retryDenied.Load(),
		Paused:        p.paused.Load(),
		BodyPaused:    p.bodyPaused.Load(),
		Upgrades:      p.upgrades.Load(),
		Tunnels:       p.tunnels.Load(),
		Client:        p.client.Stats(),
	}
	for _, u := range p.ups.load().list {
		st := UpstreamStats{
			Addr:          u.name,
			State:         "up",
			InFlight:      u.inflight.Load(),
			Requests:      u.requests.Load(),
			Retries:       u.retries.Load(),
			ConnectErrors: u.connectErrs.Load(),
			ResetErrors:   u.resetErrs.Load(),
			Timeouts:      u.timeouts.Load(),
			BadResponses:  u.badReplies.Load(),
			Status5xx:     u.status5xx.Load(),
			Status4xx:     u.status4xx.Load(),
			Canceled:      u.canceled.Load(),
			Ejections:     u.ejections.Load(),
		}
		for _, cu := range s.Client.Upstreams {
			if cu.Addr == u.addr && cu.TLS == u.tls {
				st.NewConns, st.ReusedConns = cu.NewConns, cu.ReusedConns
			}
		}
		if lat := u.latency(now, p.cfg.ewmaTau); lat > 0 && !math.IsInf(lat, 0) {
			st.LatencyEWMA = time.Duration(lat)
		}
		switch {
		case u.draining.Load():
			st.State = "draining"
		case u.down.Load():
			st.State = "down"
		case u.ejectedUntil.Load() > now:
			st.State = "ejected"
		}
		s.Upstreams = append(s.Upstreams, st)
	}
	return s
}
