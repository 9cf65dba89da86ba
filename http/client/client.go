package client

import (
	"crypto/tls"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	vnet "github.com/veloq/veloq/net"
)

// A Client sends HTTP/1.1 requests to upstreams over keep-alive
// connections it pools per loop: a request made on loop L uses L's
// connections to its upstream, so loops share no lock on the request path.
// It is safe for concurrent use: Send on each loop, Do and Transport from
// any goroutine.
type Client struct {
	o options

	loops   []*vnet.Loop // for Do and Transport
	ownLoop bool         // the loops were started by New and stop with Close
	next    atomic.Uint32

	states atomic.Pointer[[]*loopState] // copy-on-write: read without a lock
	mu     sync.Mutex                   // guards adding to states, and ups
	ups    []*upstream                  // every upstream of every loop, for Stats
	closed atomic.Bool

	tlsConf   *tls.Config // o.tls with ALPN http/1.1 and a session cache
	tlsConfH2 *tls.Config // the same offering "h2" first, for ProtoHTTP2
}

// Option configures a Client.
type Option func(*options)

type options struct {
	maxConns    int
	maxIdle     int
	maxQueued   int
	idleTimeout time.Duration
	dialTimeout time.Duration
	headTimeout time.Duration
	tls         *tls.Config
	maxHead     int
	maxFields   int
	loops       []*vnet.Loop
	backend     vnet.Backend
	nloops      int
	// drainTimeout bounds a cancelled call's drain (drain.go); tests
	// shorten or lengthen it (withDrainTimeout), users do not set it.
	drainTimeout time.Duration
}

// Defaults of the options.
const (
	DefaultMaxConnsPerHost     = 256
	DefaultMaxIdleConnsPerHost = 64
	DefaultMaxQueuedPerHost    = 1024
	DefaultIdleTimeout         = 90 * time.Second
	DefaultDialTimeout         = 10 * time.Second
	DefaultResponseTimeout     = 60 * time.Second
)

// WithMaxConnsPerHost bounds the connections to one upstream per loop
// (default 256). Requests beyond it wait, in order, for a connection.
func WithMaxConnsPerHost(n int) Option { return func(o *options) { o.maxConns = n } }

// WithMaxIdleConnsPerHost bounds the idle connections kept to one upstream
// per loop (default 64); a connection freed beyond it is closed.
func WithMaxIdleConnsPerHost(n int) Option { return func(o *options) { o.maxIdle = n } }

// WithMaxQueuedPerHost bounds the requests waiting for a connection to one
// upstream per loop (default 1024); past it a request fails at once with
// ErrQueueFull.
func WithMaxQueuedPerHost(n int) Option { return func(o *options) { o.maxQueued = n } }

// WithIdleTimeout closes a pooled connection idle for d (default 90 s).
func WithIdleTimeout(d time.Duration) Option { return func(o *options) { o.idleTimeout = d } }

// WithDialTimeout bounds a connect (default 10 s); for TLS the handshake
// has its own bound (vnet.DefaultTLSHandshakeTimeout).
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.dialTimeout = d } }

// WithResponseHeaderTimeout bounds the wait for a response head once the
// request is written (default 60 s); past it the call fails with
// ErrTimeout and the connection is closed.
func WithResponseHeaderTimeout(d time.Duration) Option {
	return func(o *options) { o.headTimeout = d }
}

// WithTLSConfig sets the TLS configuration for requests with TLS set. The
// default verifies the upstream's certificate against the system roots
// with the host of Addr as server name. The client offers ALPN
// "http/1.1" unless the config sets NextProtos.
func WithTLSConfig(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// WithMaxResponseHeaderBytes bounds a response head, status line and
// fields (default 64 KiB); a larger head fails the call with a
// *ProtocolError.
func WithMaxResponseHeaderBytes(n int) Option { return func(o *options) { o.maxHead = n } }

// WithMaxResponseFields bounds the field lines of a response head and of
// a chunked body's trailer section (default 128).
func WithMaxResponseFields(n int) Option { return func(o *options) { o.maxFields = n } }

// WithLoops makes Do and Transport run their requests on loops (for
// example a vnet.Server's loops) instead of loops of the Client's own.
// The Client does not close them.
func WithLoops(loops []*vnet.Loop) Option { return func(o *options) { o.loops = loops } }

// WithBackend selects the backend of the loops the Client starts itself
// (without WithLoops). Default vnet.BackendAuto.
func WithBackend(b vnet.Backend) Option { return func(o *options) { o.backend = b } }

// WithNumLoops sets how many loops the Client starts itself (without
// WithLoops). Default: one per CPU.
func WithNumLoops(n int) Option { return func(o *options) { o.nloops = n } }

// New returns a Client. Unless WithLoops gives it loops, it starts its
// own for Do and Transport (one per CPU), which Close stops.
func New(opts ...Option) (*Client, error) {
	c := &Client{}
	for _, opt := range opts {
		opt(&c.o)
	}
	o := &c.o
	o.maxConns = orDefault(o.maxConns, DefaultMaxConnsPerHost)
	o.maxIdle = orDefault(o.maxIdle, DefaultMaxIdleConnsPerHost)
	o.maxQueued = orDefault(o.maxQueued, DefaultMaxQueuedPerHost)
	o.idleTimeout = orDefault(o.idleTimeout, DefaultIdleTimeout)
	o.dialTimeout = orDefault(o.dialTimeout, DefaultDialTimeout)
	o.headTimeout = orDefault(o.headTimeout, DefaultResponseTimeout)
	o.drainTimeout = orDefault(o.drainTimeout, drainTimeout)
	o.maxIdle = min(o.maxIdle, o.maxConns)
	c.tlsConf = clientTLS(o.tls)
	c.tlsConfH2 = c.tlsConf.Clone()
	if o.tls == nil || len(o.tls.NextProtos) == 0 {
		c.tlsConfH2.NextProtos = []string{"h2", "http/1.1"}
	}
	empty := []*loopState{}
	c.states.Store(&empty)
	if len(o.loops) > 0 {
		c.loops = o.loops
		return c, nil
	}
	n := orDefault(o.nloops, runtime.NumCPU())
	for i := range n {
		l, err := vnet.NewLoop(i, vnet.Config{Backend: o.backend})
		if err != nil {
			for _, l := range c.loops {
				l.Close()
			}
			return nil, err
		}
		c.loops = append(c.loops, l)
	}
	c.ownLoop = true
	return c, nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// clientTLS returns the configuration DialTLS gets: cfg (or the default)
// with ALPN http/1.1 and a session cache, so reconnects resume.
func clientTLS(cfg *tls.Config) *tls.Config {
	if cfg == nil {
		cfg = &tls.Config{}
	}
	cfg = cfg.Clone()
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"http/1.1"}
	}
	if cfg.ClientSessionCache == nil {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	}
	return cfg
}

// Close stops the Client: idle pooled connections are closed, calls in
// flight on the Client's own loops fail, and later calls fail with
// ErrClientClosed. Loops given with WithLoops keep running; calls in
// flight there finish.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	if c.ownLoop {
		for _, l := range c.loops {
			l.Close()
		}
		return nil
	}
	for _, ls := range *c.states.Load() {
		_ = ls.loop.Post(ls.closeIdle)
	}
	return nil
}

// pickLoop chooses the loop for a Do or RoundTrip: round-robin.
func (c *Client) pickLoop() *vnet.Loop {
	return c.loops[int(c.next.Add(1))%len(c.loops)]
}

// state returns l's pools, making them on l's first request. Called on l.
func (c *Client) state(l *vnet.Loop) *loopState {
	for _, ls := range *c.states.Load() {
		if ls.loop == l {
			return ls
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.states.Load()
	ls := &loopState{loop: l, cl: c, ups: make(map[upKey]*upstream)}
	next := append(append(make([]*loopState, 0, len(old)+1), old...), ls)
	c.states.Store(&next)
	return ls
}

// Stats counts a Client's requests and connections, in total and per
// upstream (summed over loops).
//
// A call ends in one of three ways: complete, failed (Errors) or given up
// by its caller (Canceled). Only Errors says something went wrong; a
// cancellation is the caller's choice, such as a proxy whose client left
// (a load generator stopping closes its connections with requests in
// flight: one cancellation each). A cancelled HTTP/1 call's connection
// is closed unless the rest of its response is short (Drained; see
// Call.Cancel), so cancellations are also why NewConns may exceed the
// connections a steady load needs.
type Stats struct {
	Requests    uint64 // calls sent (retries not counted again)
	NewConns    uint64 // connections dialed
	ReusedConns uint64 // requests sent on a pooled connection
	Retries     uint64 // calls retried on a fresh connection
	// Errors counts the calls that failed: the upstream or the network
	// failed them (ErrUpstreamClosed, ErrTimeout, ErrDial, a
	// *ProtocolError), or the client refused them (ErrQueueFull,
	// ErrInvalidRequest, ErrClientClosed). Cancellations are not counted
	// here.
	Errors uint64
	// Canceled counts the calls their caller gave up (ErrCanceled:
	// Call.Cancel, the context of Do, a Response.Body closed early).
	Canceled uint64
	// Drained counts the connections of cancelled calls that were kept:
	// the rest of the response was read, discarded, and the connection
	// pooled (see Call.Cancel).
	Drained   uint64
	Upstreams []UpstreamStats
}

// UpstreamStats are one upstream's counters, summed over the loops, and
// its connections now. Errs, Canceled and Drained are as Stats' Errors,
// Canceled and Drained. Open counts the connections dialing or open, Idle
// and Draining (reading the rest of a cancelled call's response) among
// them; Queued the calls waiting for one.
type UpstreamStats struct {
	Addr                                           string
	TLS                                            bool
	Requests, NewConns, ReusedConns, Retries, Errs uint64
	Canceled, Drained                              uint64
	Open, Idle, Draining, Queued                   int
}

// Stats returns the Client's counters. Safe from any goroutine.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	ups := append([]*upstream(nil), c.ups...)
	c.mu.Unlock()
	var s Stats
	byKey := map[upKey]int{}
	for _, u := range ups {
		i, ok := byKey[u.key]
		if !ok {
			i = len(s.Upstreams)
			byKey[u.key] = i
			s.Upstreams = append(s.Upstreams, UpstreamStats{Addr: u.key.addr, TLS: u.key.tls})
		}
		us := &s.Upstreams[i]
		us.Requests += u.st.requests.Load()
		us.NewConns += u.st.newConns.Load()
		us.ReusedConns += u.st.reused.Load()
		us.Retries += u.st.retries.Load()
		us.Errs += u.st.errors.Load()
		us.Canceled += u.st.canceled.Load()
		us.Drained += u.st.drained.Load()
		us.Draining += int(u.st.draining.Load())
		us.Open += int(u.st.open.Load())
		us.Idle += int(u.st.idle.Load())
		us.Queued += int(u.st.queued.Load())
	}
	for _, us := range s.Upstreams {
		s.Requests += us.Requests
		s.NewConns += us.NewConns
		s.ReusedConns += us.ReusedConns
		s.Retries += us.Retries
		s.Errors += us.Errs
		s.Canceled += us.Canceled
		s.Drained += us.Drained
	}
	return s
}

// upStats are one loop's counters for one upstream: written only by that
// loop (no contention), read by Stats from any goroutine.
type upStats struct {
	requests, newConns, reused, retries, errors, canceled, drained atomic.Uint64
	open, idle, queued, draining                                   atomic.Int64
}

// countEnd counts a call that ended with err: a failure, or the caller's
// cancellation.
func (st *upStats) countEnd(err error) {
	if errors.Is(err, ErrCanceled) {
		st.canceled.Add(1)
		return
	}
	st.errors.Add(1)
}
