package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/http/client"
	"github.com/veloq/veloq/http/internal/checked"
	"github.com/veloq/veloq/http/internal/h1"
	vnet "github.com/veloq/veloq/net"
)

// ErrNoUpstreams is returned by New when no upstream is given.
var ErrNoUpstreams = errors.New("proxy: no upstreams")

// A Proxy is a reverse proxy: a [vhttp.Handler] that forwards each
// request to one of its upstreams with the HTTP client on the request's
// own loop and streams the answer back. See the package documentation.
type Proxy struct {
	cfg       config
	ups       upstreams
	client    *client.Client
	ownClient bool

	rr          atomic.Uint64 // round-robin position
	live        atomic.Int64  // requests in flight (retry budget)
	liveRetries atomic.Int64  // of which retrying
	noUpstream  atomic.Uint64 // 503s: nothing available
	retryDenied atomic.Uint64 // retries the budget refused
	paused      atomic.Uint64 // upstreams paused for a slow client
	bodyPaused  atomic.Uint64 // request bodies paused for a slow upstream
	upgrades    atomic.Uint64 // tunnels opened after a 101
	tunnels     atomic.Int64  // tunnels open
	tunnelPeak  atomic.Int64  // most output a tunnel queued toward one side

	loopEx   atomic.Pointer[[]*loopExchanges] // per loop: see exchanges
	loopExMu sync.Mutex                       // held to add a loop to loopEx
	health   healthState
}

// New returns a proxy to the upstreams given by [WithUpstreams] (at
// least one; more can be added later with Add).
func New(opts ...Option) (*Proxy, error) {
	p := &Proxy{cfg: defaultConfig()}
	for _, o := range opts {
		if err := o(&p.cfg); err != nil {
			return nil, err
		}
	}
	if len(p.cfg.upstreams) == 0 {
		return nil, ErrNoUpstreams
	}
	p.ups.ring = p.cfg.policy == Hash
	p.ups.set.Store(newSet(nil, p.ups.ring))
	for _, a := range p.cfg.upstreams {
		if err := p.Add(a); err != nil {
			return nil, err
		}
	}
	p.client = p.cfg.client
	if p.client == nil {
		// The proxy sends on its server's loops; the client's own loops
		// serve only Do and Transport, which the proxy does not use, so
		// one is enough (New starts them eagerly).
		c, err := client.New(client.WithNumLoops(1))
		if err != nil {
			return nil, fmt.Errorf("proxy: %w", err)
		}
		p.client, p.ownClient = c, true
	}
	return p, nil
}

// Client returns the HTTP client the proxy forwards with.
func (p *Proxy) Client() *client.Client { return p.client }

// Add puts an upstream ("host:port", "http://host:port" or
// "https://host:port") in the set; requests start going to it at once.
func (p *Proxy) Add(addr string) error {
	u, err := parseUpstream(addr)
	if err != nil {
		return err
	}
	return p.ups.add(u)
}

// Remove takes an upstream out of the set now. Requests already
// forwarded to it finish normally; new ones go elsewhere.
func (p *Proxy) Remove(addr string) error {
	_, err := p.ups.remove(addr)
	return err
}

// Drain stops sending new requests to an upstream and removes it from
// the set once the requests in flight on it have finished.
func (p *Proxy) Drain(addr string) error {
	u := p.ups.find(addr)
	if u == nil {
		return fmt.Errorf("%w: %s", ErrUnknownUpstream, addr)
	}
	u.draining.Store(true)
	p.drained(u)
	return nil
}

// drained removes a draining upstream with nothing in flight.
func (p *Proxy) drained(u *upstream) {
	if u.draining.Load() && u.inflight.Load() == 0 && !u.removed.Load() {
		p.ups.remove(u.name) // an error means someone removed it first
	}
}

// ServeHTTP forwards r. It runs inline on the connection's loop and
// returns at once: the answer is streamed through the detached
// response as the upstream's arrives.
func (p *Proxy) ServeHTTP(w *vhttp.ResponseWriter, r *vhttp.Request) {
	c := w.Conn()
	if c == nil {
		// Offloaded: the answer cannot be streamed from the loop.
		w.WriteHeader(vhttp.StatusInternalServerError)
		w.WriteString("proxy: the reverse proxy must run inline on the loop, not offloaded\n")
		return
	}
	if string(r.Method) == "CONNECT" {
		w.WriteHeader(vhttp.StatusMethodNotAllowed)
		return
	}
	l := c.Loop()
	p.startHealth(l)
	now := since(l.Now())
	var key []byte
	if p.cfg.policy == Hash {
		key = p.cfg.hashKey.key(r)
	}
	up := p.pick(p.ups.load(), now, key, nil)
	if up == nil {
		p.noUpstream.Add(1)
		w.WriteHeader(vhttp.StatusServiceUnavailable)
		w.WriteString("no upstream available\n")
		return
	}
	home := p.exchanges(l)
	ex := home.get(p)
	// The Responder lives in the pooled exchange: Detach would allocate
	// one per request.
	rsp := &ex.rspMem
	if err := w.DetachTo(rsp); err != nil {
		home.put(ex)
		w.WriteHeader(vhttp.StatusInternalServerError)
		return
	}
	ex.begin(r, c, rsp)
	p.live.Add(1)
	rsp.OnGone(ex.onGone)
	ex.send(l, up)
}

// exchange is one forwarded request, from ServeHTTP to the end of the
// response; pooled, so the request path allocates nothing once warm.
// Everything in it runs on one loop.
type exchange struct {
	p     *Proxy
	loop  *vnet.Loop
	rsp   *vhttp.Responder // &rspMem while the answer is wanted, else nil
	front *vnet.Conn       // the client's connection
	up    *upstream
	call  *client.Call

	rspMem vhttp.Responder // the answer's handle: see ServeHTTP
	req    client.Request
	arena  []byte         // the request's bytes, kept for retries
	conns  [][]byte       // tokens of the Connection fields that name fields (views)
	fields []client.Field // into arena
	kinds  []fieldKind    // of the request's fields in begin, then of the response's in OnResponseHead

	timer      *vnet.Timer // per-attempt timeout, on timerLoop
	timerLoop  *vnet.Loop
	onTimeout  func()
	home       *loopExchanges // the free list of the loop that made ex
	onGone     func()
	onWritable func(error)
	onBody     func(part []byte, end bool, err error)
	onBodyRoom func(error)
	onConn     func()

	sent      int64 // when the attempt was sent (since epoch)
	clockOff  int64 // since(offLoop.Now()) - offLoop.Clock(): see now
	offLoop   *vnet.Loop
	active    int64 // loop clock when the upstream was last heard from
	attempt   int
	idem      bool // the method is idempotent
	head      bool // HEAD: no body in the answer
	callLive  bool // the current attempt's call has not ended
	headSent  bool // the response head went to the client
	finished  bool // End or Fail called on rsp
	gone      bool // the client left
	paused    bool // the call is paused waiting for the client
	timedOut  bool // the current attempt's timer fired
	badSwitch bool // the upstream answered 101 to a request without Upgrade
	badBody   bool // the upstream sent more body than it announced
	upgrade   bool // the request asks for an Upgrade (upgrade.go)
	retried   bool // counted in liveRetries
	settled   bool // no longer counted as live
	// The request body streamed from the client to the upstream
	// (ServeHTTP under vhttp.StreamBody): bodyTaken counts its bytes
	// taken from the client so far, which a retry could not send again.
	streamed   bool
	bodyPaused bool // the client's body waits for the upstream to take more
	bodyTaken  int64
	// The client's body is read only once an attempt is connected, so
	// that a refused connect took none of it and may be retried:
	// bodyAsked says OnBody was called, connWait that a retry paused
	// the body until its connection, bodyEnded that the (empty) body's
	// end was taken.
	bodyAsked, connWait, bodyEnded bool
	reqTrailer                     []client.Field // requestTrailer's, reused
}

// now returns since(l.Now()), the loop's cached time on the proxy's
// epoch, as the loop's clock plus an offset computed once per loop:
// both are monotonic readings, so the sum is exact, and it spares the
// time.Time arithmetic (Add then Sub: 300 instructions per request,
// callgrind, cmd/veloq-proxy -backend epoll to nginx).
func (ex *exchange) now(l *vnet.Loop) int64 {
	if ex.offLoop != l {
		ex.clockOff, ex.offLoop = since(l.Now())-l.Clock(), l
	}
	return ex.clockOff + l.Clock()
}

func newExchange(p *Proxy) *exchange {
	ex := &exchange{p: p}
	ex.onTimeout = ex.timeout
	ex.onGone = ex.clientGone
	ex.onWritable = ex.writable
	ex.onBody = ex.bodyPart
	ex.onBodyRoom = ex.bodyRoom
	ex.onConn = ex.connected
	return ex
}

// maxKeptArena bounds the request bytes a pooled exchange keeps: a large
// upload's buffer is left to the collector rather than pinned.
const maxKeptArena = 64 << 10

// begin copies what the upstream request needs out of r (whose views die
// when ServeHTTP returns) into the exchange's arena.
func (ex *exchange) begin(r *vhttp.Request, c *vnet.Conn, rsp *vhttp.Responder) {
	p := ex.p
	ex.loop, ex.rsp, ex.front = c.Loop(), rsp, c
	// Only HTTP/1.1 sets Upgrade: an HTTP/2 stream cannot become a
	// tunnel this way.
	ex.upgrade = r.Upgrade != nil && r.ProtoMajor == 1
	ex.attempt, ex.headSent, ex.finished, ex.gone, ex.paused = 0, false, false, false, false
	ex.idem = idempotent(r.Method)
	ex.head = r.IsHead()

	// One allocation-free pass: size the arena first so that views into
	// it stay valid while it fills.
	n := len(r.Method) + len(r.Target) + len(r.Host) + len(r.Body) + len(r.Upgrade) + len(p.cfg.host) + len(p.cfg.via) + 256
	for i := range r.Headers {
		n += len(r.Headers[i].Name) + len(r.Headers[i].Value) + 2
	}
	a := ex.arena[:0]
	if cap(a) < n {
		a = make([]byte, 0, n+n/4)
	}
	f := ex.fields[:0]
	put := func(b []byte) []byte { // b copied into the arena
		s := len(a)
		a = append(a, b...)
		return a[s:len(a):len(a)]
	}
	// One pass classifies each field once (three passes classified each
	// field three times), gathers the tokens of Connection, and puts
	// X-Forwarded-For first into the arena, as one contiguous value: the
	// values received, then the client's address.
	conns, kinds := ex.conns[:0], ex.kinds[:0]
	xffStart, xff := len(a), false
	for i := range r.Headers {
		k := classify(r.Headers[i].Name)
		kinds = append(kinds, k)
		switch k {
		case kindConn:
			conns = appendConnTokens(conns, r.Headers[i].Value)
		case kindXFF:
			if xff {
				a = append(a, ", "...)
			}
			a = append(a, r.Headers[i].Value...)
			xff = true
		}
	}
	ex.conns, ex.kinds = conns, kinds
	if xff {
		a = append(a, ", "...)
	}
	ip := c.RemoteAddrPort().Addr().Unmap() // a TCP peer's; none (invalid) for another
	if ip.IsValid() {
		a = appendIP(a, ip)
	} else {
		a = append(a, "unknown"...)
	}
	f = append(f, client.Field{Name: nameXFF, Value: a[xffStart:len(a):len(a)]})
	for i := range r.Headers {
		h := &r.Headers[i]
		switch kinds[i] {
		case kindPass, kindForwarded:
			if len(ex.conns) > 0 && listed(ex.conns, h.Name) {
				continue
			}
			f = append(f, client.Field{Name: put(h.Name), Value: put(h.Value)})
		case kindTE:
			if hasToken(h.Value, "trailers") && !listed(ex.conns, h.Name) {
				f = append(f, client.Field{Name: nameTE, Value: valTrailers})
			}
		}
	}
	if ex.upgrade {
		f = append(f, client.Field{Name: nameConnection, Value: valUpgrade},
			client.Field{Name: nameUpgrade, Value: put(r.Upgrade)})
	}
	proto := "http"
	if c.TLS() != nil {
		proto = "https"
	}
	xfp := valHTTP
	if c.TLS() != nil {
		xfp = valHTTPS
	}
	f = append(f, client.Field{Name: nameXFProto, Value: xfp})
	if r.Host != nil {
		f = append(f, client.Field{Name: nameXFHost, Value: put(r.Host)})
	}
	if p.cfg.forwarded {
		s := len(a)
		a = append(a, "for="...)
		if ip.Is6() {
			a = append(a, "\"["...)
			a = ip.AppendTo(a)
			a = append(a, "]\""...)
		} else if ip.IsValid() {
			a = appendIP(a, ip)
		} else {
			a = append(a, "unknown"...)
		}
		if r.Host != nil {
			a = append(a, ";host=\""...)
			a = append(a, r.Host...)
			a = append(a, '"')
		}
		a = append(a, ";proto="...)
		a = append(a, proto...)
		f = append(f, client.Field{Name: nameForwarded, Value: a[s:len(a):len(a)]})
	}
	if p.cfg.via != "" {
		s := len(a)
		a = appendVia(a, r.ProtoMajor, r.ProtoMinor, p.cfg.via)
		f = append(f, client.Field{Name: nameVia, Value: a[s:len(a):len(a)]})
	}

	ex.req.Method = methodString(r.Method, put)
	ex.req.Target = arenaString(put(originForm(r)))
	if p.cfg.host != "" {
		ex.req.Host = p.cfg.host
	} else {
		ex.req.Host = arenaString(put(r.Host))
	}
	ex.req.Body = nil
	if len(r.Body) > 0 {
		ex.req.Body = put(r.Body)
	}
	// Under vhttp.StreamBody a request's body follows its head: it is
	// forwarded in parts as the client sends them (bodyPart).
	ex.streamed = r.HasBody() && r.Body == nil
	ex.req.StreamBody, ex.req.ContentLength = ex.streamed, r.ContentLength
	ex.bodyPaused, ex.bodyTaken = false, 0
	ex.bodyAsked, ex.connWait, ex.bodyEnded = false, false, false
	ex.req.Header = f
	ex.fields = f
	ex.arena = a
	ex.conns = ex.conns[:0] // views into r: not kept
}

// arenaString returns b, a view into the exchange's arena, as a string
// without copying it. Sound because the arena's bytes are not written
// again until the exchange is freed, and the strings live only in ex.req,
// which free clears; the client copies the request into its own buffer
// during Send and keeps no reference to the strings.
func arenaString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// methodString returns the method as a string, a constant for the
// common ones.
func methodString(m []byte, put func([]byte) []byte) string {
	if s := h1.MethodString(m); s != "" {
		return s
	}
	return arenaString(put(m))
}

// Field names and values the proxy adds, made once: a []byte conversion
// of a constant in a field that escapes would allocate per request.
var (
	nameTE        = []byte("TE")
	valTrailers   = []byte("trailers")
	nameXFF       = []byte("X-Forwarded-For")
	nameXFProto   = []byte("X-Forwarded-Proto")
	nameXFHost    = []byte("X-Forwarded-Host")
	nameForwarded = []byte("Forwarded")
	nameVia       = []byte("Via")
	valHTTP       = []byte("http")
	valHTTPS      = []byte("https")
)

// originForm returns the target to send upstream: r's origin-form
// target, or the path and query of an absolute-form one.
func originForm(r *vhttp.Request) []byte {
	t := r.Target
	if len(t) > 0 && (t[0] == '/' || t[0] == '*') {
		return t
	}
	if len(r.Path) > 0 && r.Query == nil {
		return r.Path
	}
	// Absolute form with a query or without a path: rebuild in a
	// fresh buffer (rare: only proxies send absolute-form targets).
	b := make([]byte, 0, len(r.Path)+len(r.Query)+2)
	if len(r.Path) == 0 {
		b = append(b, '/')
	}
	b = append(b, r.Path...)
	if r.Query != nil {
		b = append(b, '?')
		b = append(b, r.Query...)
	}
	return b
}

func appendVia(a []byte, major, minor int, name string) []byte {
	switch {
	case major == 2:
		a = append(a, "2 "...)
	case minor == 0:
		a = append(a, "1.0 "...)
	default:
		a = append(a, "1.1 "...)
	}
	return append(a, name...)
}

// idempotent reports whether a request with this method may be sent
// again (RFC 9110 §9.2.2).
func idempotent(m []byte) bool {
	switch string(m) {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

// send makes one attempt on up.
func (ex *exchange) send(l *vnet.Loop, up *upstream) {
	p := ex.p
	ex.up = up
	up.inflight.Add(1)
	up.requests.Add(1)
	ex.attempt++
	ex.callLive, ex.timedOut, ex.paused, ex.badSwitch, ex.badBody = true, false, false, false, false
	ex.sent = ex.now(l)
	ex.active = l.Clock()
	ex.req.Addr, ex.req.TLS, ex.req.Proto = up.addr, up.tls, up.proto
	// The timer is left armed when an attempt ends, and not moved when
	// the next one starts while it is still armed: it then fires no later
	// than the timeout, maybe early, and timeout re-arms it for what is
	// left. Stopping it at each end and arming it at each start cost
	// two heap operations per request (250 instructions, callgrind,
	// cmd/veloq-proxy -backend epoll). Fired while ex is free, it does
	// nothing (no call is live). ex and its timer stay on the loop that
	// made ex (loopExchanges), so it never runs on another goroutine.
	switch {
	case ex.timer == nil || ex.timerLoop != l:
		ex.timer, ex.timerLoop = l.AfterFunc(p.cfg.timeout, ex.onTimeout), l
	case !ex.timer.Pending():
		ex.timer.Reset(p.cfg.timeout)
	}
	// Send never calls ex back before it returns.
	ex.call = p.client.Send(l, &ex.req, ex)
	if ex.streamed {
		if ex.bodyAsked && !ex.connWait && ex.rsp != nil {
			// A retry: no byte went to the failed attempt (retry), and
			// none may go before this one's connect succeeds.
			ex.connWait = true
			ex.rsp.PauseBody()
		}
		ex.call.WhenConnected(ex.onConn)
	}
}

// connected: the attempt's upstream connection is up. The client's body
// is read from now on: a connect that failed before took none of it, so
// the request could go to another upstream (retry).
func (ex *exchange) connected() {
	if !ex.callLive || ex.rsp == nil {
		return
	}
	if !ex.bodyAsked {
		ex.bodyAsked = true
		ex.rsp.OnBody(ex.onBody)
		return
	}
	if ex.bodyEnded {
		_ = ex.call.EndBodyTrailer(ex.requestTrailer()) // the empty body ended before the retry
	}
	if ex.connWait {
		ex.connWait = false
		ex.rsp.ResumeBody()
	}
}

// timeout ends an attempt whose upstream has been silent for the
// timeout: the client gets 504 (or a cut answer). The timer is not moved
// on every body part (a heap operation each); it re-arms itself here for
// what is left when the upstream was heard from meanwhile, or when the
// call is paused because the client is the slow one.
func (ex *exchange) timeout() {
	if !ex.callLive || ex.call == nil {
		return
	}
	d := ex.p.cfg.timeout
	idle := time.Duration(ex.loop.Clock() - ex.active)
	if ex.paused {
		ex.timer.Reset(d)
		return
	}
	if idle < d {
		ex.timer.Reset(d - idle)
		return
	}
	ex.timedOut = true
	ex.call.Cancel()
}

// clientGone: the client left; stop the upstream request.
func (ex *exchange) clientGone() {
	if ex.gone || ex.finished {
		return
	}
	ex.gone = true
	// From a failed Write as from OnGone, the Responder's answer is
	// over: its OnGone will not run later, when this exchange may serve
	// another client (TestFailedWriteDoesNotCancelTheNextClient).
	ex.rsp = nil
	if ex.callLive && ex.call != nil {
		ex.call.Cancel()
	}
	ex.maybeFree()
}

// writable: the client caught up; read the upstream again.
func (ex *exchange) writable(err error) {
	if !ex.paused {
		return
	}
	ex.paused = false
	if !ex.callLive || ex.call == nil {
		ex.maybeFree()
		return
	}
	if err != nil {
		ex.call.Cancel()
		return
	}
	if ex.rsp != nil && ex.rsp.Buffered() > ex.p.cfg.maxBuffer {
		// An early wake-up: wait again.
		ex.paused = true
		ex.rsp.WhenWritable(ex.onWritable)
		return
	}
	ex.call.Resume()
}

// OnResponseHead forwards the upstream's status and fields.
func (ex *exchange) OnResponseHead(call *client.Call, resp *client.ResponseHead) {
	p, up := ex.p, ex.up
	if resp.Status == 101 && !ex.upgrade {
		// The proxy removed Upgrade, so a switch is an upstream gone
		// wrong; its connection is not taken over: 502.
		ex.badSwitch = true
		call.Cancel()
		return
	}
	ex.active = ex.loop.Clock()
	now := ex.now(ex.loop)
	lat := float64(now - ex.sent)
	if resp.Status >= 500 {
		up.status5xx.Add(1)
		p.failed(up, now)
		lat = max(lat, p.cfg.penalty)
	} else {
		if resp.Status >= 400 {
			up.status4xx.Add(1)
		}
		p.succeeded(up, now)
	}
	if p.cfg.policy == PeakEWMA {
		up.observe(now, lat, p.cfg.ewmaTau)
	}
	if ex.rsp == nil {
		return
	}
	if resp.Status == 101 {
		ex.switchProtocols(call, resp)
		return
	}
	h := ex.rsp.Header()
	trailersOnly := resp.EndStream && grpcAnswer(resp.Fields)
	// Each name is classified once: the first walk needs every kind to
	// find the Connection fields before the second forwards anything.
	conns, kinds := ex.conns[:0], ex.kinds[:0]
	for i := range resp.Fields {
		k := classify(resp.Fields[i].Name)
		kinds = append(kinds, k)
		if k == kindConn {
			conns = appendConnTokens(conns, resp.Fields[i].Value)
		}
	}
	ex.kinds = kinds
	for i := range resp.Fields {
		fl := &resp.Fields[i]
		switch kinds[i] {
		case kindConn, kindHop, kindTE, kindFramed:
			continue
		}
		if len(conns) > 0 && listed(conns, fl.Name) {
			continue
		}
		if trailersOnly && grpcStatusField(fl.Name) {
			ex.rsp.Trailer().AddBytes(fl.Name, fl.Value)
			continue
		}
		if resp.HTTP2 {
			// HPACK delivers any bytes: checked by AddBytes.
			h.AddBytes(fl.Name, fl.Value)
		} else {
			// The client's HTTP/1 parser refused any field AddBytes
			// would clean or drop.
			checked.AddResponseField(h, fl.Name, fl.Value)
		}
	}
	ex.conns = conns[:0]
	if p.cfg.via != "" {
		s := len(ex.arena)
		major := 1
		if resp.HTTP2 {
			major = 2
		}
		ex.arena = appendVia(ex.arena, major, resp.Minor, p.cfg.via)
		h.AddBytes(nameVia, ex.arena[s:])
		ex.arena = ex.arena[:s]
	}
	ex.headSent = true
	// A HEAD, 204 or 304 answer keeps its length; the Responder sends no
	// body for it.
	cl := resp.ContentLength
	if trailersOnly {
		cl = -1 // the status goes in trailers, which need an open body
	}
	ex.rsp.WriteHead(resp.Status, cl)
}

// OnResponseBody forwards a part of a chunked or HTTP/2 body (copied).
func (ex *exchange) OnResponseBody(call *client.Call, b []byte) {
	ex.active = ex.loop.Clock()
	if rsp := ex.rsp; rsp != nil {
		_, err := rsp.Write(b)
		ex.wrote(call, rsp, err)
	}
}

// OnResponseBodyFrom forwards a part of an HTTP/1 body from the upstream
// connection: on io_uring, a part that ends its receive buffer is sent
// to the client from that buffer (Responder.WriteFrom). Copying every
// part into the client's output was 2,500 instructions per 16 KiB
// answer and a tenth of the proxy's CPU at 1 MiB (callgrind and pprof,
// cmd/veloq-proxy to nginx).
func (ex *exchange) OnResponseBodyFrom(call *client.Call, src *vnet.Conn, n int) {
	ex.active = ex.loop.Clock()
	if rsp := ex.rsp; rsp != nil {
		_, err := rsp.WriteFrom(src, n)
		ex.wrote(call, rsp, err)
	}
}

// wrote follows a part of the body given to the client, pausing the
// upstream while the client is more than the limit behind.
func (ex *exchange) wrote(call *client.Call, rsp *vhttp.Responder, err error) {
	switch {
	case errors.Is(err, net.ErrClosed):
		// The client is gone (its connection is closing; OnGone will
		// not run): the upstream did nothing wrong.
		ex.clientGone()
		return
	case err != nil:
		// ErrBodyTooLong: more body than the upstream's head announced
		// (HTTP/2 DATA past its content-length, RFC 9113 section
		// 8.1.1): a malformed answer, cut by OnResponseEnd. Taken for
		// the client's going, it left the answer open until the
		// server's stall timeout.
		ex.badBody = true
		call.Cancel()
		return
	}
	if !ex.paused && rsp.Buffered() > ex.p.cfg.maxBuffer {
		ex.paused = true
		ex.p.paused.Add(1)
		call.Pause()
		rsp.WhenWritable(ex.onWritable)
	}
}

// OnResponseEnd finishes the answer, or retries, or reports the failure.
func (ex *exchange) OnResponseEnd(call *client.Call, trailer []client.Field, err error) {
	p, up := ex.p, ex.up
	ex.callLive = false
	ex.call = nil
	// The timer stays armed: see send.
	up.inflight.Add(-1)
	if up.draining.Load() {
		p.drained(up)
	}
	now := ex.now(ex.loop)
	if err == nil {
		if ex.rsp != nil {
			ex.forwardTrailer(trailer)
			ex.rsp.End()
			ex.finished = true
		}
		ex.maybeFree()
		return
	}
	status := ex.classify(err, now)
	if ex.rsp != nil && !ex.headSent && ex.retry(err, now) {
		return
	}
	if ex.rsp != nil {
		ex.rsp.Fail(status) // an error answer, or a cut if the head went
		ex.finished = true
	}
	ex.maybeFree()
}

func (ex *exchange) forwardTrailer(trailer []client.Field) {
	if len(trailer) == 0 {
		return
	}
	t := ex.rsp.Trailer()
	for i := range trailer {
		switch classify(trailer[i].Name) {
		case kindConn, kindHop, kindTE, kindFramed:
			continue
		}
		t.AddBytes(trailer[i].Name, trailer[i].Value)
	}
}

// requestTrailer returns the trailer fields of the client's streamed
// body to pass on, without the hop-by-hop and framing ones, as
// forwardTrailer does for the answer's.
func (ex *exchange) requestTrailer() []client.Field {
	t := ex.reqTrailer[:0]
	if ex.rsp == nil {
		return nil
	}
	for _, f := range ex.rsp.BodyTrailer() {
		switch classify(f.Name) {
		case kindConn, kindHop, kindTE, kindFramed:
			continue
		}
		t = append(t, client.Field{Name: f.Name, Value: f.Value})
	}
	ex.reqTrailer = t
	return t
}

// classify counts a failed attempt and returns the status the client
// gets for it.
func (ex *exchange) classify(err error, now int64) int {
	p, up := ex.p, ex.up
	switch {
	case ex.badSwitch, ex.badBody:
		// Cancelled by the proxy, but for the upstream's fault: checked
		// before the cancellations that are not.
		up.badReplies.Add(1)
	case ex.gone, errors.Is(err, client.ErrCanceled) && !ex.timedOut:
		// The proxy gave up on the call for the client's sake: no mark
		// against the upstream. (wrk stopping 64 clients in the middle of
		// 1 MiB answers ejected a healthy upstream for 5 s.)
		up.canceled.Add(1)
		return vhttp.StatusBadGateway
	case errors.Is(err, client.ErrInvalidRequest):
		// Not the upstream's fault: nothing went to it.
		return vhttp.StatusBadRequest
	case errors.Is(err, client.ErrQueueFull), errors.Is(err, client.ErrClientClosed):
		// The proxy's own pool is full or closing: no mark against the
		// upstream either.
		return vhttp.StatusServiceUnavailable
	case ex.timedOut, errors.Is(err, client.ErrTimeout):
		up.timeouts.Add(1)
		p.failed(up, now)
		p.penalize(up, now, ex.sent)
		return vhttp.StatusGatewayTimeout
	case connectFailed(err):
		up.connectErrs.Add(1)
	case isProtocolError(err):
		up.badReplies.Add(1)
	default:
		up.resetErrs.Add(1)
	}
	p.failed(up, now)
	p.penalize(up, now, ex.sent)
	return vhttp.StatusBadGateway
}

// retry sends the request to another upstream when that is safe: the
// attempt failed before any response byte, the request may be repeated
// (a connect failure sent nothing, so any method may; otherwise only an
// idempotent one), attempts and budget remain, and another upstream is
// available.
func (ex *exchange) retry(err error, now int64) bool {
	p := ex.p
	if ex.timedOut || ex.gone || ex.badSwitch || ex.badBody || ex.attempt > p.cfg.retries || responseStarted(err) {
		return false
	}
	if ex.streamed && ex.bodyTaken > 0 {
		// Part of the body went to the failed call and is gone: the
		// request cannot be sent whole again.
		return false
	}
	dial := connectFailed(err)
	if !dial && !(ex.idem && errors.Is(err, client.ErrUpstreamClosed)) {
		return false
	}
	if !ex.retried {
		budget := max(p.cfg.budgetMin, int64(p.cfg.budgetRatio*float64(p.live.Load())))
		if p.liveRetries.Load() >= budget {
			p.retryDenied.Add(1)
			return false
		}
	}
	next := p.pick(p.ups.load(), now, nil, ex.up)
	if next == nil {
		return false
	}
	if !ex.retried {
		ex.retried = true
		p.liveRetries.Add(1)
	}
	next.retries.Add(1)
	ex.send(ex.loop, next)
	return true
}

// maybeFree settles the exchange once the call ended and the answer
// finished (or the client left): the request stops counting as live, and
// the exchange goes back to the pool unless a writability callback may
// still come (then it is freed from that callback, or left to the
// collector if the Responder drops it, never reused while it might be
// called).
func (ex *exchange) maybeFree() {
	if ex.callLive || !(ex.finished || ex.gone) {
		return
	}
	p := ex.p
	if !ex.settled {
		ex.settled = true
		p.live.Add(-1)
		if ex.retried {
			p.liveRetries.Add(-1)
		}
	}
	if ex.paused {
		return
	}
	ex.free()
}

func (ex *exchange) free() {
	ex.settled, ex.retried = false, false
	ex.rsp, ex.up, ex.call, ex.front = nil, nil, nil, nil
	ex.rspMem = vhttp.Responder{}
	ex.req = client.Request{}
	if cap(ex.arena) > maxKeptArena {
		ex.arena = nil
	}
	clear(ex.fields[:cap(ex.fields)])
	ex.home.put(ex)
}

// loopExchanges are the exchanges free on one loop. An exchange stays
// on the loop that made it, taken and given back on it without locks:
// sync.Pool's Get and Put cost 170 instructions per request more (callgrind,
// cmd/veloq-proxy -backend epoll), its Get mostly on its slow path with
// 64 requests in flight.
type loopExchanges struct {
	loop *vnet.Loop
	free []*exchange
}

// maxFreeExchanges bounds the exchanges a loop keeps for reuse, as the
// client bounds its calls.
const maxFreeExchanges = 1024

// exchanges returns l's free exchanges, adding them on l's first
// request: a copy-on-write list scanned for l, as the client finds its
// per-loop state.
func (p *Proxy) exchanges(l *vnet.Loop) *loopExchanges {
	if all := p.loopEx.Load(); all != nil {
		for _, le := range *all {
			if le.loop == l {
				return le
			}
		}
	}
	p.loopExMu.Lock()
	defer p.loopExMu.Unlock()
	var old []*loopExchanges
	if all := p.loopEx.Load(); all != nil {
		old = *all
		for _, le := range old {
			if le.loop == l {
				return le
			}
		}
	}
	le := &loopExchanges{loop: l}
	next := append(append(make([]*loopExchanges, 0, len(old)+1), old...), le)
	p.loopEx.Store(&next)
	return le
}

// get returns a free exchange of the loop, or a new one. Call it on the
// loop.
func (le *loopExchanges) get(p *Proxy) *exchange {
	if n := len(le.free); n > 0 {
		ex := le.free[n-1]
		le.free[n-1] = nil
		le.free = le.free[:n-1]
		return ex
	}
	ex := newExchange(p)
	ex.home = le
	return ex
}

// put gives ex back to its loop, on the loop; past the bound it is left
// to the collector (its timer, if armed, does nothing: no call is live).
func (le *loopExchanges) put(ex *exchange) {
	if len(le.free) < maxFreeExchanges {
		le.free = append(le.free, ex)
	}
}

// responseStarted reports whether any byte of the response had arrived
// when the call failed.
func responseStarted(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.ResponseStarted
}

// connectFailed reports whether the call failed to connect, so that
// nothing of the request was sent. The client reports a connect that
// fails at once as ErrDial, and one that fails later (a nonblocking
// connect refused) as ErrUpstreamClosed wrapping the dial's *net.OpError.
func connectFailed(err error) bool {
	if errors.Is(err, client.ErrDial) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func isProtocolError(err error) bool {
	var e *client.ProtocolError
	return errors.As(err, &e)
}

// appendIP appends ip's text as netip.Addr.AppendTo does, an IPv4
// address with a few divisions by constants: AppendTo took 143
// instructions per request for X-Forwarded-For (callgrind,
// cmd/veloq-proxy -backend epoll), this about 40.
func appendIP(a []byte, ip netip.Addr) []byte {
	if !ip.Is4() {
		return ip.AppendTo(a)
	}
	for i, o := range ip.As4() {
		if i > 0 {
			a = append(a, '.')
		}
		switch {
		case o >= 100:
			a = append(a, '0'+o/100, '0'+o/10%10, '0'+o%10)
		case o >= 10:
			a = append(a, '0'+o/10, '0'+o%10)
		default:
			a = append(a, '0'+o)
		}
	}
	return a
}

// succeeded notes an answer that was not a failure.
func (p *Proxy) succeeded(u *upstream, now int64) {
	if u.fails.Load() != 0 {
		u.fails.Store(0)
	}
	if u.ejectStreak.Load() != 0 && u.ejectedUntil.Load() <= now {
		u.ejectStreak.Store(0)
	}
}

// failed counts a failure and ejects u after cfg.ejectAfter in a row.
func (p *Proxy) failed(u *upstream, now int64) {
	if p.cfg.ejectAfter <= 0 || u.fails.Add(1) < p.cfg.ejectAfter {
		return
	}
	u.fails.Store(0)
	streak := u.ejectStreak.Add(1)
	cool := p.cfg.ejectBase << min(streak-1, 20)
	if cool > p.cfg.ejectMax || cool <= 0 {
		cool = p.cfg.ejectMax
	}
	u.ejectedUntil.Store(now + int64(cool))
	u.ejections.Add(1)
	p.cfg.log.Warn("proxy: upstream ejected", "upstream", u.name, "for", cool)
}

// penalize makes a failure count as a slow answer for peak EWMA.
func (p *Proxy) penalize(u *upstream, now, sent int64) {
	if p.cfg.policy == PeakEWMA {
		u.observe(now, max(float64(now-sent), p.cfg.penalty), p.cfg.ewmaTau)
	}
}

// bodyPart forwards a part of a streamed request body to the upstream
// call, pausing the client's body while the call holds more than the
// buffer limit (the upstream reads slower than the client sends), so
// that a pair holds a bounded amount whatever the body's size. A client
// that cuts its body cancels the call: the upstream sees the request
// cut short (its connection reset, or its stream), never complete.
func (ex *exchange) bodyPart(part []byte, end bool, err error) {
	call := ex.call
	if !ex.callLive || call == nil {
		return // the attempt ended (an early answer, a failure): dropped
	}
	ex.active = ex.loop.Clock()
	if err != nil {
		call.Cancel()
		return
	}
	ex.bodyTaken += int64(len(part))
	if len(part) > 0 && call.WriteBody(part) != nil {
		call.Cancel()
		return
	}
	if end {
		ex.bodyEnded = true
		if call.EndBodyTrailer(ex.requestTrailer()) != nil {
			call.Cancel()
		}
		return
	}
	if ex.rsp != nil && !ex.bodyPaused && call.BodyBuffered() > ex.p.cfg.maxBuffer {
		ex.bodyPaused = true
		ex.p.bodyPaused.Add(1)
		ex.rsp.PauseBody()
		call.WhenBodyWritable(ex.onBodyRoom)
	}
}

// bodyRoom: the upstream took the body down to the client's low-water
// mark; the client's body flows again.
func (ex *exchange) bodyRoom(err error) {
	if !ex.bodyPaused {
		return
	}
	ex.bodyPaused = false
	if err != nil || ex.rsp == nil {
		return // the call ended: OnResponseEnd says how
	}
	ex.active = ex.loop.Clock()
	ex.rsp.ResumeBody()
}
