package proxy

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veloq/veloq/http/client"
)

// Errors of the upstream set.
var (
	// ErrUnknownUpstream is returned by Drain and Remove for an address
	// that is not in the set.
	ErrUnknownUpstream = errors.New("proxy: no such upstream")
	// ErrDuplicateUpstream is returned by Add for an address already in
	// the set.
	ErrDuplicateUpstream = errors.New("proxy: upstream already in the set")
	// ErrBadUpstream is returned for an upstream address that is not
	// host:port, http://host:port, https://host:port, h2c://host:port or
	// h2://host:port.
	ErrBadUpstream = errors.New("proxy: bad upstream address")
)

// upstream is one server requests are forwarded to. Its counters are
// atomics because every loop forwards to it; the request path touches
// inflight, the request count and, at the end, the latency and the
// failure streak.
type upstream struct {
	name  string       // as given: "host:port" or with its scheme
	addr  string       // host:port dialed
	tls   bool         // https:// or h2://
	proto client.Proto // HTTP/2 for h2c:// (prior knowledge) and h2:// (TLS, ALPN)

	inflight atomic.Int64
	draining atomic.Bool
	removed  atomic.Bool

	// Passive ejection (outlier detection): after cfg.ejectAfter
	// failures in a row (connect failures, resets, 5xx) the upstream is
	// out until ejectedUntil (loop-independent monotonic nanoseconds),
	// for a cooldown that doubles with each ejection in a row.
	fails        atomic.Int32
	ejectStreak  atomic.Int32
	ejectedUntil atomic.Int64

	// Active health: down while the checks say so.
	down      atomic.Bool
	checkOK   int // consecutive passed checks (health-check loop only)
	checkFail int // consecutive failed checks (health-check loop only)

	// Peak EWMA of the latency in nanoseconds (float64 bits) and when it
	// was last updated (mono nanoseconds); races between loops lose a
	// sample at worst.
	ewma     atomic.Uint64
	ewmaWhen atomic.Int64

	requests, retries, ejections                 atomic.Uint64
	connectErrs, resetErrs, timeouts, badReplies atomic.Uint64
	status5xx, status4xx, canceled               atomic.Uint64
}

// parseUpstream splits "host:port", "http://host:port",
// "https://host:port", "h2c://host:port" or "h2://host:port".
func parseUpstream(s string) (*upstream, error) {
	u := &upstream{name: s, addr: s}
	switch {
	case strings.HasPrefix(s, "https://"):
		u.addr, u.tls = s[len("https://"):], true
	case strings.HasPrefix(s, "http://"):
		u.addr = s[len("http://"):]
	case strings.HasPrefix(s, "h2c://"):
		u.addr, u.proto = s[len("h2c://"):], client.ProtoHTTP2
	case strings.HasPrefix(s, "h2://"):
		u.addr, u.tls, u.proto = s[len("h2://"):], true, client.ProtoHTTP2
	}
	u.addr = strings.TrimSuffix(u.addr, "/")
	i := strings.LastIndexByte(u.addr, ':')
	if i <= 0 || i == len(u.addr)-1 || strings.ContainsAny(u.addr, "/?# ") {
		return nil, fmt.Errorf("%w: %q", ErrBadUpstream, s)
	}
	return u, nil
}

// available reports whether new requests may go to u at time now.
func (u *upstream) available(now int64) bool {
	return !u.draining.Load() && !u.down.Load() && u.ejectedUntil.Load() <= now
}

// latency returns the peak-EWMA latency decayed to now, in nanoseconds.
func (u *upstream) latency(now int64, tau float64) float64 {
	e := math.Float64frombits(u.ewma.Load())
	dt := float64(now - u.ewmaWhen.Load())
	if dt <= 0 {
		return e
	}
	return e * math.Exp(-dt/tau)
}

// observe folds a latency sample into the peak EWMA: a sample above the
// average replaces it at once (peak sensitivity: a server turning slow is
// avoided immediately), one below decays into it with time constant tau.
func (u *upstream) observe(now int64, sample, tau float64) {
	e := math.Float64frombits(u.ewma.Load())
	if sample > e {
		e = sample
	} else {
		dt := float64(now - u.ewmaWhen.Load())
		w := math.Exp(-max(dt, 0) / tau)
		e = e*w + sample*(1-w)
	}
	u.ewma.Store(math.Float64bits(e))
	u.ewmaWhen.Store(now)
}

// upstreamSet is an immutable snapshot of the upstreams, replaced whole
// (copy on write) when one is added, drained or removed, so the request
// path reads it with one atomic load and no lock.
type upstreamSet struct {
	list []*upstream
	ring []ringPoint // consistent-hash ring, sorted by hash
}

// ringPoint is one of an upstream's virtual nodes on the hash ring.
type ringPoint struct {
	hash uint64
	up   *upstream
}

// vnodes is how many points each upstream has on the hash ring: with 160
// the load of 4 upstreams stays within about ±10 % of even, and a change
// of the set moves about 1/n of the keys.
const vnodes = 160

func newSet(list []*upstream, withRing bool) *upstreamSet {
	s := &upstreamSet{list: list}
	if withRing {
		s.ring = make([]ringPoint, 0, len(list)*vnodes)
		for _, u := range list {
			h := fnv64(fnvOffset, u.name)
			for i := 0; i < vnodes; i++ {
				h = mix64(h + uint64(i))
				s.ring = append(s.ring, ringPoint{h, u})
			}
		}
		slices.SortFunc(s.ring, func(a, b ringPoint) int { return cmp.Compare(a.hash, b.hash) })
	}
	return s
}

// upstreams owns the set and its mutations (rare: a lock is fine there).
type upstreams struct {
	mu   sync.Mutex
	set  atomic.Pointer[upstreamSet]
	ring bool // keep a hash ring (hash policy)
}

func (us *upstreams) load() *upstreamSet { return us.set.Load() }

func (us *upstreams) add(u *upstream) error {
	us.mu.Lock()
	defer us.mu.Unlock()
	old := us.set.Load()
	for _, o := range old.list {
		if o.name == u.name {
			return fmt.Errorf("%w: %s", ErrDuplicateUpstream, u.name)
		}
	}
	list := append(append([]*upstream(nil), old.list...), u)
	us.set.Store(newSet(list, us.ring))
	return nil
}

// remove takes the upstream named name out of the set; requests already
// on it finish normally (they hold it directly).
func (us *upstreams) remove(name string) (*upstream, error) {
	us.mu.Lock()
	defer us.mu.Unlock()
	old := us.set.Load()
	for i, o := range old.list {
		if o.name == name {
			list := append(append([]*upstream(nil), old.list[:i]...), old.list[i+1:]...)
			us.set.Store(newSet(list, us.ring))
			o.removed.Store(true)
			return o, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknownUpstream, name)
}

func (us *upstreams) find(name string) *upstream {
	for _, o := range us.set.Load().list {
		if o.name == name {
			return o
		}
	}
	return nil
}

// epoch is the time base of ejections and latencies, shared by all loops
// (each loop's own clock has its own epoch).
var epoch = time.Now()

// since returns t in nanoseconds since epoch; with a loop's cached time
// (Loop.Now) it costs no clock read.
func since(t time.Time) int64 { return int64(t.Sub(epoch)) }
