package proxy

import (
	"math/rand/v2"
)

// A Policy chooses the upstream for each request among those available
// (not draining, not ejected, not down by health checks).
type Policy int

const (
	// RoundRobin takes the available upstreams in turn.
	RoundRobin Policy = iota
	// LeastOutstanding takes the one with fewer requests in flight of
	// two picked at random (power of two choices): nearly as good as
	// scanning for the least loaded, with no herd on one upstream.
	LeastOutstanding
	// PeakEWMA takes, of two picked at random, the one with the lower
	// peak-EWMA latency times (requests in flight + 1), as Finagle and
	// Linkerd do. Errors and 5xx count as a latency of at least the
	// failure penalty, so a fast stream of errors does not look
	// attractive.
	PeakEWMA
	// Hash maps a key of the request (see WithHashKey) onto a
	// consistent-hash ring, so one key keeps going to one upstream while
	// it is available and a change of the set moves few keys.
	Hash
)

var policyNames = [...]string{"round-robin", "least-outstanding", "peak-ewma", "hash"}

func (p Policy) String() string {
	if p >= 0 && int(p) < len(policyNames) {
		return policyNames[p]
	}
	return "Policy(?)"
}

// ParsePolicy returns the policy named s (as its String).
func ParsePolicy(s string) (Policy, bool) {
	for i, n := range policyNames {
		if n == s {
			return Policy(i), true
		}
	}
	return 0, false
}

// pick returns an available upstream of set other than avoid (the one a
// retry leaves), or nil. key is the hash key (Hash policy only).
func (p *Proxy) pick(set *upstreamSet, now int64, key []byte, avoid *upstream) *upstream {
	list := set.list
	n := len(list)
	if n == 0 {
		return nil
	}
	switch p.cfg.policy {
	case Hash:
		if len(set.ring) > 0 && key != nil {
			return pickRing(set.ring, fnvBytes(key), now, avoid)
		}
	case LeastOutstanding, PeakEWMA:
		if n >= 2 {
			i := rand.IntN(n)
			j := rand.IntN(n - 1)
			if j >= i {
				j++
			}
			a, b := list[i], list[j]
			okA := a != avoid && a.available(now)
			okB := b != avoid && b.available(now)
			switch {
			case okA && okB:
				if p.cost(b, now) < p.cost(a, now) {
					return b
				}
				return a
			case okA:
				return a
			case okB:
				return b
			}
			// Both out: fall back to a scan from a random start.
			return scan(list, i, now, avoid)
		}
	}
	start := int((p.rr.Add(1) - 1) % uint64(n))
	return scan(list, start, now, avoid)
}

// scan returns the first available upstream from list[start] on.
func scan(list []*upstream, start int, now int64, avoid *upstream) *upstream {
	n := len(list)
	for k := 0; k < n; k++ {
		u := list[(start+k)%n]
		if u != avoid && u.available(now) {
			return u
		}
	}
	return nil
}

// cost is what the P2C policies compare.
func (p *Proxy) cost(u *upstream, now int64) float64 {
	out := float64(u.inflight.Load())
	if p.cfg.policy == LeastOutstanding {
		return out
	}
	return (u.latency(now, p.cfg.ewmaTau) + 1) * (out + 1)
}

// pickRing walks the ring clockwise from h to the first available
// upstream.
func pickRing(ring []ringPoint, h uint64, now int64, avoid *upstream) *upstream {
	lo, hi := 0, len(ring)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ring[m].hash < h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for k := 0; k < len(ring); k++ {
		u := ring[(lo+k)%len(ring)].up
		if u != avoid && u.available(now) {
			return u
		}
	}
	return nil
}

// FNV-1a, 64 bits, then a finalizer so that neighbouring keys spread
// over the ring.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnv64(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func fnvBytes(b []byte) uint64 {
	h := uint64(fnvOffset)
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return mix64(h)
}

// mix64 is the splitmix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
