package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/veloq/veloq/internal/sock"
	vnet "github.com/veloq/veloq/net"
)

// ErrNoBackend closes a client when no backend could be connected.
var ErrNoBackend = errors.New("proxy: no backend reachable")

// ErrPeerFailed resets one side of a pair when the other failed.
var ErrPeerFailed = errors.New("proxy: the other side of the pair failed")

// maxBackends bounds the backend list (a pair remembers the backends it
// tried in a 64-bit mask).
const maxBackends = 64

// Proxy forwards every client connection to one of its backends. It is a
// vnet.Handler (and EOFHandler) for the client side: serve it with
// vnet.Listen or vnet.NewServer. It is safe to use from many loops.
type Proxy struct {
	def    *group     // the backends given to New; nil when there are none
	routes routeTable // WithSNI's routes
	opts   options
	shards [statShards]shard

	// WARN lines that a burst of failures would repeat, once a second each.
	dialLog, noBackendLog, localLog, helloLog, noRouteLog rateLog
}

// group is a set of backends taken round-robin: the default ones, or
// those of one SNI route.
type group struct {
	name     string // the route's name, or "default"
	backends []*backendAddr
	next     atomic.Uint32
}

type backendAddr struct {
	addr      string       // numeric host:port, dialled without a resolver
	downUntil atomic.Int64 // unix nanoseconds; a failed connect skips it until then
}

// New returns a proxy to the given backends ("host:port"). Names are
// resolved here, once, so that loops never block on a resolver. With
// WithSNI, backends are the default route and may be empty.
func New(backends []string, opts ...Option) (*Proxy, error) {
	p := &Proxy{opts: defaultOptions()}
	for _, o := range opts {
		o(&p.opts)
	}
	if err := p.opts.validate(); err != nil {
		return nil, err
	}
	if len(backends) == 0 && !p.opts.sni {
		return nil, errors.New("proxy: no backends given")
	}
	if len(backends) == 0 && len(p.opts.routes) == 0 {
		return nil, errors.New("proxy: no backends and no SNI routes given")
	}
	// A backend named twice, by two routes or a route and the default, is
	// one backend: a failed connect puts it in cooldown for all of them.
	pool := make(map[string]*backendAddr)
	var err error
	if len(backends) > 0 {
		if p.def, err = newGroup("default", backends, pool); err != nil {
			return nil, err
		}
	}
	if p.routes, err = newRouteTable(p.opts.routes, pool); err != nil {
		return nil, err
	}
	return p, nil
}

// newGroup resolves addrs into a group, taking backends already resolved
// from pool and adding the new ones to it.
func newGroup(name string, addrs []string, pool map[string]*backendAddr) (*group, error) {
	if len(addrs) > maxBackends {
		return nil, fmt.Errorf("proxy: at most %d backends per route, got %d", maxBackends, len(addrs))
	}
	g := &group{name: name, backends: make([]*backendAddr, len(addrs))}
	for i, b := range addrs {
		a, err := net.ResolveTCPAddr("tcp", b)
		if err != nil {
			return nil, fmt.Errorf("proxy: backend %q: %w", b, err)
		}
		if a.Port == 0 || a.IP == nil {
			return nil, fmt.Errorf("proxy: backend %q: want host:port with a non-zero port", b)
		}
		ba := pool[a.String()]
		if ba == nil {
			ba = &backendAddr{addr: a.String()}
			pool[ba.addr] = ba
		}
		g.backends[i] = ba
	}
	return g, nil
}

// Backends returns the default backends' resolved addresses, in order.
func (p *Proxy) Backends() []string {
	if p.def == nil {
		return nil
	}
	return p.def.addrs()
}

func (g *group) addrs() []string {
	out := make([]string, len(g.backends))
	for i, b := range g.backends {
		out[i] = b.addr
	}
	return out
}

// pair is one client and its backend connection. Both live on the same
// loop, and so does every use of pair: no locks. Its states (see the
// package doc) are routing (WithSNI: no backend yet, the client's first
// bytes are read and kept), connecting (backend set, not linked; the
// client's reading paused), linked, and closed.
type pair struct {
	p        *Proxy
	sh       *shard
	client   *vnet.Conn
	backend  *vnet.Conn
	grp      *group // the backends to try: the default ones or the route's
	backIdx  int    // in grp
	tried    uint64 // backends of grp tried, by index
	routing  bool   // waiting for the ClientHello (WithSNI)
	hello    *vnet.Timer
	heard    int  // bytes of the hello in hand (routing)
	marks    int  // recordMarks of the input at the last parse (routing)
	linked   bool // the backend connected
	copyOnly bool // a TLS client: the proxy sees plaintext, its socket carries ciphertext
	up, down flow // client→backend, backend→client
}

// flow is one direction's state.
type flow struct {
	paused  bool // source paused until the destination drains
	spliced bool // moved by splice(2) from now on
	bytes   *atomic.Uint64
}

// OnOpen starts a pair for a new client: its reading waits while the
// backend connects.
func (p *Proxy) OnOpen(c *vnet.Conn) {
	sh := p.shard(c)
	sh.accepted.Add(1)
	sh.active.Add(1)
	pr := &pair{p: p, sh: sh, client: c}
	pr.up.bytes, pr.down.bytes = &sh.bytesUp, &sh.bytesDown
	c.SetValue(pr)
	// The pair bounds each direction's queue itself by pausing the side
	// that feeds it; the loop's own pause, which stops the reading of the
	// connection whose output is large, would stop the wrong side here.
	c.SetWriteWaterMarks(0, 0)
	// A TLS client (vnet.WithTLS) cannot be spliced: the kernel would move
	// ciphertext. Knowing it here spares a refused SpliceTo per large read.
	pr.copyOnly = c.TLS() != nil
	if p.opts.sni {
		pr.startRouting(c)
		return
	}
	pr.grp = p.def
	c.PauseRead()
	pr.dial()
}

// pick chooses the next backend of g for a pair: round-robin over the
// backends the pair has not tried, preferring those not cooling down after
// a failure. It returns -1 when every backend has been tried.
func (g *group) pick(tried uint64) int {
	n := len(g.backends)
	start := int(g.next.Add(1)-1) % n
	now := time.Now().UnixNano()
	fallback := -1
	for k := range n {
		i := (start + k) % n
		if tried&(1<<i) != 0 {
			continue
		}
		if g.backends[i].downUntil.Load() <= now {
			return i
		}
		if fallback < 0 {
			fallback = i // cooling down, but better than nothing
		}
	}
	return fallback
}

// dial connects pr to the next backend, or closes the client when none is
// left to try.
func (pr *pair) dial() {
	p, c := pr.p, pr.client
	for {
		i := pr.grp.pick(pr.tried)
		if i < 0 {
			p.noBackendLog.log(p.opts.logger, slog.LevelWarn, "proxy: closing client: no backend reachable",
				"client", addrString(c.RemoteAddr()), "route", pr.grp.name, "tried", bits.OnesCount64(pr.tried))
			pr.sh.noBackend.Add(1)
			c.Abort(ErrNoBackend)
			return
		}
		pr.tried |= 1 << i
		pr.backIdx = i
		// On the loop Dial reads the deadline once and returns: the
		// context is done with at once.
		ctx, cancel := context.WithTimeout(context.Background(), p.opts.dialTimeout)
		b, err := c.Loop().Dial(ctx, "tcp", pr.grp.backends[i].addr, pr)
		cancel()
		if err != nil {
			if isLocal(err) {
				// No socket for the dial: this process is out of descriptors
				// or memory. Every backend would fail alike and none is to
				// blame.
				pr.sh.localFailures.Add(1)
				p.localLog.log(p.opts.logger, slog.LevelWarn, "proxy: closing client: no socket for a backend connection",
					"err", err)
				c.Abort(err)
				return
			}
			pr.dialFailed(err) // synchronous failure
			continue
		}
		b.SetWriteWaterMarks(0, 0) // as for the client (OnOpen)
		pr.backend = b
		return
	}
}

// dialFailed records a failed connect and starts the backend's cooldown.
func (pr *pair) dialFailed(err error) {
	p := pr.p
	b := pr.grp.backends[pr.backIdx]
	b.downUntil.Store(time.Now().Add(p.opts.cooldown).UnixNano())
	pr.sh.dialFailures.Add(1)
	p.dialLog.log(p.opts.logger, slog.LevelWarn, "proxy: backend connect failed", "backend", b.addr, "err", err)
}

// isLocal reports whether a dial failed for a reason of this process
// (descriptor table or kernel memory full) rather than of the backend.
func isLocal(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// OnOpen runs when the backend connected: forwarding starts.
func (pr *pair) OnOpen(b *vnet.Conn) {
	pr.linked = true
	pr.sh.connected.Add(1)
	c := pr.client
	if pr.p.opts.splice == SpliceAlways {
		pr.splice(&pr.up, c, b)
		pr.splice(&pr.down, b, c)
	}
	c.ResumeRead() // a no-op once spliced: the splice reads now
}

// splice switches one direction to splice(2). If the reactor cannot, the
// direction goes on copying.
func (pr *pair) splice(f *flow, src, dst *vnet.Conn) {
	if pr.copyOnly {
		return
	}
	if err := src.SpliceTo(dst); err != nil {
		if !errors.Is(err, vnet.ErrClosed) {
			pr.p.opts.logger.Debug("proxy: splicing unavailable; copying", "err", err)
		}
		return
	}
	f.spliced = true
}

// OnData forwards the client's input to the backend, or, while the pair
// is routing, looks for the ClientHello in it.
func (p *Proxy) OnData(c *vnet.Conn) {
	pr := c.Value().(*pair)
	if pr.routing {
		pr.route(c)
		return
	}
	pr.forward(&pr.up, c, pr.backend)
}

// OnData forwards the backend's input to the client.
func (pr *pair) OnData(b *vnet.Conn) { pr.forward(&pr.down, b, pr.client) }

// forward moves src's input to dst's output, no more than the buffer
// limit allows; what does not fit stays in src, whose reading pauses
// until dst has sent half of the limit.
func (pr *pair) forward(f *flow, src, dst *vnet.Conn) {
	limit := pr.p.opts.limit
	chunk := src.Buffered()
	n := min(chunk, limit-dst.OutputBuffered())
	if n > 0 {
		// On io_uring, a large chunk is sent from the buffer it was
		// received in (no copy into dst's output).
		if _, err := src.ForwardTo(dst, n); err != nil {
			resetConn(src, ErrPeerFailed)
			return
		}
		f.bytes.Add(uint64(n))
	}
	if queued := dst.OutputBuffered(); src.Buffered() > 0 || queued >= limit {
		pr.sh.notePeak(queued)
		f.paused = true
		src.PauseRead()
		dst.OnDrain(limit/2, func() {
			f.paused = false
			if !src.Closed() {
				src.ResumeRead()
			}
		})
		return
	}
	if pr.p.opts.splice == SpliceLarge && !f.spliced && chunk >= pr.p.opts.spliceThreshold {
		pr.splice(f, src, dst)
	}
}

// OnEOF: the client finished sending; the backend sees a FIN after the
// client's last byte.
func (p *Proxy) OnEOF(c *vnet.Conn) {
	pr := c.Value().(*pair)
	if pr.routing {
		pr.endedInHello(c)
		return
	}
	pr.halfClose(pr.backend, c)
}

// OnEOF: the backend finished sending; the client sees a FIN after it.
func (pr *pair) OnEOF(b *vnet.Conn) { pr.halfClose(pr.client, b) }

// halfClose passes src's FIN on to dst. Each connection closes itself once
// it has both received a FIN and sent one.
func (pr *pair) halfClose(dst, src *vnet.Conn) {
	if dst == nil || dst.CloseWrite() != nil {
		src.Close() // nowhere to pass it: this side is done too
	}
}

// OnClose ends the client's side of the pair.
func (p *Proxy) OnClose(c *vnet.Conn, err error) {
	pr := c.Value().(*pair)
	pr.endRouting()
	pr.countSpliced(&pr.up, c)
	pr.sh.active.Add(-1)
	if b := pr.backend; b != nil && (err != nil || !pr.linked) {
		resetConn(b, ErrPeerFailed) // also cancels a connect in flight
	}
}

// OnClose ends the backend's side: a failed connect tries the next
// backend, a failure resets the client.
func (pr *pair) OnClose(b *vnet.Conn, err error) {
	if b != pr.backend {
		return
	}
	pr.countSpliced(&pr.down, b)
	c := pr.client
	if !pr.linked {
		pr.backend = nil
		if c.Closed() {
			return // the client left while connecting
		}
		pr.dialFailed(err)
		pr.dial()
		return
	}
	if err != nil {
		resetConn(c, ErrPeerFailed)
	}
}

func (pr *pair) countSpliced(f *flow, src *vnet.Conn) {
	if n := src.SplicedBytes(); n > 0 {
		f.bytes.Add(uint64(n))
	}
}

// resetConn closes c with a reset (SO_LINGER 0) so its peer sees the
// stream broke, not a clean end.
func resetConn(c *vnet.Conn, cause error) {
	if c.Closed() {
		return
	}
	_ = sock.LingerZero(c.Fd())
	c.Abort(cause)
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
