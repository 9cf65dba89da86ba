package proxy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	vnet "github.com/veloq/veloq/net"
	"github.com/veloq/veloq/tlshello"
)

// ErrNoRoute closes a TLS client whose server name matches no route when
// there is no default route (WithSNI without backends).
var ErrNoRoute = errors.New("proxy: no route for the TLS server name")

// ErrHelloTimeout closes a client whose ClientHello was not complete
// within the hello timeout (WithHelloTimeout).
var ErrHelloTimeout = errors.New("proxy: no complete TLS ClientHello in time")

// errHelloCut closes a client whose FIN came inside its ClientHello.
var errHelloCut = fmt.Errorf("proxy: the client ended inside its ClientHello: %w", io.ErrUnexpectedEOF)

// A Route sends the TLS clients whose ClientHello names a matching server
// to its backends, without terminating TLS (WithSNI).
type Route struct {
	// Name is a server name, matched exactly but for case, or "*.parent",
	// which matches any name of one more label under parent:
	// "*.example.com" matches "a.example.com", not "example.com" nor
	// "a.b.example.com". An exact name wins over a wildcard.
	Name string
	// Backends are "host:port" addresses, taken round-robin.
	Backends []string
}

// String returns the route as ParseRoute reads it.
func (r Route) String() string { return r.Name + "=" + strings.Join(r.Backends, ",") }

// ParseRoute reads a route written NAME=HOST:PORT[,HOST:PORT...], such as
// "api.example.com=10.0.0.1:443,10.0.0.2:443" or
// "*.example.com=10.0.0.3:443". The backends are resolved by New.
func ParseRoute(s string) (Route, error) {
	name, list, ok := strings.Cut(s, "=")
	if !ok || list == "" {
		return Route{}, fmt.Errorf("proxy: route %q: want NAME=HOST:PORT[,HOST:PORT...]", s)
	}
	name = strings.ToLower(name)
	if err := checkName(name); err != nil {
		return Route{}, fmt.Errorf("proxy: route %q: %w", s, err)
	}
	return Route{Name: name, Backends: strings.Split(list, ",")}, nil
}

// checkName accepts a lower-case DNS name, or one whose first label is
// "*": labels not empty, of letters, digits, '-' and '_'.
func checkName(name string) error {
	rest, _ := strings.CutPrefix(name, "*.")
	for label := range strings.SplitSeq(rest, ".") {
		if label == "" {
			return fmt.Errorf("server name %q has an empty label", name)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("server name %q: %q is not allowed (a wildcard is a whole first label, as in *.example.com)", name, r)
			}
		}
	}
	return nil
}

// routeTable finds the route of a server name.
type routeTable struct {
	exact map[string]*group // by name
	wild  map[string]*group // by the parent of "*.parent"
	order []*group          // as given
}

func newRouteTable(routes []Route, pool map[string]*backendAddr) (routeTable, error) {
	t := routeTable{exact: make(map[string]*group), wild: make(map[string]*group)}
	for _, r := range routes {
		name := strings.ToLower(r.Name)
		if err := checkName(name); err != nil {
			return t, fmt.Errorf("proxy: route %q: %w", r.Name, err)
		}
		if len(r.Backends) == 0 {
			return t, fmt.Errorf("proxy: route %q has no backends", r.Name)
		}
		m, key := t.exact, name
		if parent, ok := strings.CutPrefix(name, "*."); ok {
			m, key = t.wild, parent
		}
		if m[key] != nil {
			return t, fmt.Errorf("proxy: route %q given twice", r.Name)
		}
		g, err := newGroup(name, r.Backends, pool)
		if err != nil {
			return t, fmt.Errorf("proxy: route %q: %w", r.Name, err)
		}
		m[key] = g
		t.order = append(t.order, g)
	}
	return t, nil
}

// lookup returns the route of a ClientHello's server name ("" when it
// sent none), or nil when none matches.
func (t *routeTable) lookup(serverName string) *group {
	// DNS names are case-insensitive; the hello has the name as sent.
	// ToLower does not allocate for a name already in lower case.
	name := strings.ToLower(serverName)
	if g := t.exact[name]; g != nil {
		return g
	}
	if label, parent, ok := strings.Cut(name, "."); ok && label != "" {
		return t.wild[parent]
	}
	return nil
}

// Routes returns the SNI routes with their backends' resolved addresses,
// in the order given.
func (p *Proxy) Routes() []Route {
	var out []Route
	for _, g := range p.routes.order {
		out = append(out, Route{Name: g.name, Backends: g.addrs()})
	}
	return out
}

// helloPool recycles parsers: a ClientHello reuses its slices, so a
// parser that has served a few hellos parses the next without allocating.
var helloPool = sync.Pool{New: func() any { return new(tlshello.ClientHello) }}

// startRouting puts a new pair in the routing state: the client's input is
// read and kept, not forwarded, until it holds a ClientHello, for at most
// the hello timeout. Its bytes are bounded by Parse, which answers within
// tlshello.MaxLen bytes, and by the timeout.
func (pr *pair) startRouting(c *vnet.Conn) {
	pr.routing = true
	pr.hello = c.AfterFunc(pr.p.opts.helloTimeout, func() {
		if pr.routing {
			pr.refuse(c, &pr.sh.helloTimeouts, ErrHelloTimeout)
		}
	})
}

// endRouting leaves the routing state.
func (pr *pair) endRouting() {
	if pr.routing {
		pr.routing = false
		pr.hello.Stop()
		pr.hello = nil
	}
}

// route parses the client's input so far. An incomplete hello stays
// buffered and is parsed again, whole, with the next input; a complete
// one picks the route, and the hello and everything after it wait in the
// client's input until the backend has connected and forwarding takes
// them, unchanged.
func (pr *pair) route(c *vnet.Conn) {
	in, _ := c.Peek(0)
	pr.heard = len(in)
	m := recordMarks(in)
	if len(in) >= 5 && m == pr.marks {
		return // no new header or record since the last parse: no new answer
	}
	pr.marks = m
	h := helloPool.Get().(*tlshello.ClientHello)
	defer helloPool.Put(h)
	err := h.Parse(in)
	switch {
	case err == nil:
		pr.routeTo(c, h.ServerName)
	case errors.Is(err, tlshello.ErrNeedMore):
		// The timer bounds the wait.
	case errors.Is(err, tlshello.ErrNotTLS):
		pr.refuse(c, &pr.sh.notTLS, fmt.Errorf("proxy: the client's first bytes: %w", err))
	default: // malformed, or larger than tlshello.MaxLen
		pr.refuse(c, &pr.sh.badHello, fmt.Errorf("proxy: the client's first bytes: %w", err))
	}
}

// routeTo dials the backend of the route for serverName, or the default
// route's, or closes the client when there is neither.
func (pr *pair) routeTo(c *vnet.Conn, serverName string) {
	pr.endRouting()
	p := pr.p
	g := p.routes.lookup(serverName)
	if g == nil {
		g = p.def
	}
	if g == nil {
		pr.sh.noRoute.Add(1)
		p.noRouteLog.log(p.opts.logger, slog.LevelWarn, "proxy: closing client: no route for its server name",
			"client", addrString(c.RemoteAddr()), "server_name", serverName)
		c.Abort(fmt.Errorf("%w: %q", ErrNoRoute, serverName))
		return
	}
	pr.sh.routed.Add(1)
	pr.grp = g
	c.PauseRead() // as for a pair without routing, while the backend connects
	pr.dial()
}

// endedInHello handles the client's FIN while routing: a client that
// sent nothing is closed quietly (a TCP health check does that); one
// that stopped inside its hello counts as a bad hello.
func (pr *pair) endedInHello(c *vnet.Conn) {
	if pr.heard == 0 { // (Buffered answers only inside OnData)
		pr.endRouting()
		c.Close()
		return
	}
	pr.refuse(c, &pr.sh.badHello, errHelloCut)
}

// refuse closes a client whose first bytes cannot be routed, counting it
// in n.
func (pr *pair) refuse(c *vnet.Conn, n *atomic.Uint64, err error) {
	pr.endRouting()
	n.Add(1)
	p := pr.p
	p.helloLog.log(p.opts.logger, slog.LevelWarn, "proxy: closing client: no usable TLS ClientHello",
		"client", addrString(c.RemoteAddr()), "err", err)
	c.Abort(err)
}

// recordMarks counts the TLS record headers, and the records complete
// behind them, at the start of in. A hello's parse can give a new answer
// only when that count grows, so route parses once per record piece
// instead of once per read: a client trickling its hello a byte at a
// time cost about 17,000 parses of up to 16 KiB each (some 50 ms of the
// loop) and now costs two per record.
func recordMarks(in []byte) int {
	marks, off := 0, 0
	for off+5 <= len(in) {
		marks++
		end := off + 5 + (int(in[off+3])<<8 | int(in[off+4]))
		if end > len(in) {
			break
		}
		marks++
		off = end
	}
	return marks
}
