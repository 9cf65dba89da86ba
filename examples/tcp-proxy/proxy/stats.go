package proxy

import (
	"sync/atomic"

	vnet "github.com/veloq/veloq/net"
)

// Stats are a proxy's counters, summed over its loops.
type Stats struct {
	Accepted     uint64 // client connections accepted
	Active       int64  // client connections open now
	Connected    uint64 // backend connections established
	DialFailures uint64 // backend connects that failed or timed out
	NoBackend    uint64 // clients closed because no backend could be reached
	// LocalFailures counts clients closed because the proxy itself had no
	// descriptor or memory for a backend connection (EMFILE, ENFILE,
	// ENOBUFS, ENOMEM); no backend is put in cooldown for them.
	LocalFailures uint64
	BytesUp       uint64 // client → backend (spliced bytes counted when their direction ends)
	BytesDown     uint64 // backend → client
	// PeakQueued is the most output ever queued toward one connection when
	// the proxy paused its peer: what backpressure let a pair buffer.
	PeakQueued int64

	// With WithSNI: clients routed by their ClientHello, and clients
	// closed before a backend was dialled because their first bytes were
	// not a TLS ClientHello (NotTLS), were a malformed or oversized one,
	// or one their FIN cut short (BadHello), did not complete it within
	// the hello timeout (HelloTimeouts), or named a server no route
	// matched, with no default route (NoRoute).
	Routed, NotTLS, BadHello, HelloTimeouts, NoRoute uint64
}

// statShards spreads the counters so that loops do not share cache lines;
// loop i uses shard i mod statShards.
const statShards = 16

type shard struct {
	accepted, connected, dialFailures, noBackend atomic.Uint64
	localFailures                                atomic.Uint64
	routed, notTLS, badHello, helloTimeouts      atomic.Uint64
	noRoute                                      atomic.Uint64
	bytesUp, bytesDown                           atomic.Uint64
	active, peak                                 atomic.Int64
	_                                            [64]byte // keep the next shard off this cache line
}

func (p *Proxy) shard(c *vnet.Conn) *shard {
	return &p.shards[c.Loop().ID()%statShards]
}

// notePeak raises the shard's peak queue mark to n.
func (s *shard) notePeak(n int) {
	for {
		old := s.peak.Load()
		if int64(n) <= old || s.peak.CompareAndSwap(old, int64(n)) {
			return
		}
	}
}

// Stats returns the counters. Safe from any goroutine.
func (p *Proxy) Stats() Stats {
	var st Stats
	for i := range p.shards {
		s := &p.shards[i]
		st.Accepted += s.accepted.Load()
		st.Active += s.active.Load()
		st.Connected += s.connected.Load()
		st.DialFailures += s.dialFailures.Load()
		st.NoBackend += s.noBackend.Load()
		st.LocalFailures += s.localFailures.Load()
		st.BytesUp += s.bytesUp.Load()
		st.BytesDown += s.bytesDown.Load()
		st.PeakQueued = max(st.PeakQueued, s.peak.Load())
		st.Routed += s.routed.Load()
		st.NotTLS += s.notTLS.Load()
		st.BadHello += s.badHello.Load()
		st.HelloTimeouts += s.helloTimeouts.Load()
		st.NoRoute += s.noRoute.Load()
	}
	return st
}
