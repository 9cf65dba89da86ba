package http

import (
	"fmt"
	"slices"
	"strings"

	"github.com/veloq/veloq/http/internal/h1"
)

// maxPathParams bounds the wildcards of one pattern: the values live in a
// fixed array in the Request, so matching allocates nothing.
const maxPathParams = 8

// pathParam is a wildcard's value: a span of Request.Path.
type pathParam struct {
	name       string
	start, end int32
}

// PathValue returns the value of the wildcard called name in the pattern
// a [Router] matched, as raw (still percent-encoded) bytes of r.Path, or
// nil if there is no such wildcard.
func (r *Request) PathValue(name string) []byte {
	for _, p := range r.params[:r.nparams] {
		if p.name == name {
			return r.paramValue(p)
		}
	}
	return nil
}

// paramValue is the value of wildcard p in r.Path.
func (r *Request) paramValue(p pathParam) []byte {
	path := r.Path
	if len(path) == 0 {
		path = rootPath
	}
	return path[p.start:p.end:p.end]
}

var rootPath = []byte("/")

// A Router dispatches fast-path requests to handlers by method and path,
// with the pattern syntax of Go 1.22's net/http.ServeMux:
//
//		[METHOD ]/path/with/{name}/segments
//
//	  - a literal segment matches itself; {name} matches one whole segment;
//	    {name...} as the last segment matches the rest of the path,
//	    slashes included (possibly empty);
//	  - a pattern ending in a slash ("/static/") matches every path below
//	    it; "/{$}" ends a pattern that must match up to its trailing slash
//	    only ("/" matches every path, "/{$}" only "/");
//	  - without a method a pattern matches every method; GET also matches
//	    HEAD (the server sends the head without the body).
//
// When several patterns match, the more specific wins, segment by segment
// from the left: a literal over {name}, {name} over {name...} or a
// trailing-slash subtree; then a pattern with the request's method over
// one without. A path no pattern matches gets 404 Not Found; a path that
// matches only with other methods gets 405 Method Not Allowed with an
// Allow field.
//
// A route whose handler is a [StreamBody] handler (or wraps one with
// [Chain]) streams its request bodies; the other routes' are collected.
//
// Paths are matched as sent, byte for byte, without cleaning "." or ".."
// segments or decoding percent-escapes, and wildcard values are raw: a
// handler that maps them to files must check them. Nor is a subtree's
// root without its slash ("/static" for "/static/") redirected. Matching allocates
// nothing. Register every route before serving: a Router is not safe for
// concurrent Handle and ServeHTTP.
type Router struct {
	root     rnode
	notFound Handler
	// streams is set once a route's handler may stream its body
	// (a headRouter): only then does streamLimit match at the head.
	streams bool
}

// rnode is one segment position in the route tree.
type rnode struct {
	lit   []rchild // literal segments, in registration order
	param *rnode   // {name}
	pname string
	rest  *routes // {name...} or a trailing-slash subtree
	rname string  // "" for a subtree
	exact *routes // the pattern ends here
}

type rchild struct {
	seg  string
	node *rnode
}

// routes are the handlers of one pattern path, by method ("" = any).
type routes struct {
	methods []string
	hs      []Handler
	pats    []string // the patterns as registered, by method, for Request.pattern
	names   []string // wildcard names along the path, in order
	allow   string   // the Allow field value for a 405
}

// NewRouter returns an empty router. Requests it cannot match get 404.
func NewRouter() *Router { return &Router{} }

// Handle registers h for pattern. It panics on a malformed pattern, on
// more than 8 wildcards, or on a pattern registered twice: mistakes in a
// route table should stop the program at start-up.
func (m *Router) Handle(pattern string, h Handler) {
	if h == nil {
		panic("http: Router.Handle with a nil handler for " + pattern)
	}
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "", pattern
	}
	path = strings.TrimLeft(path, " ")
	if method != "" && !h1.ValidToken([]byte(method)) {
		panic(fmt.Sprintf("http: bad method in pattern %q", pattern))
	}
	if !strings.HasPrefix(path, "/") {
		panic(fmt.Sprintf("http: pattern %q: path must start with / (host patterns are not supported)", pattern))
	}
	segs := strings.Split(path[1:], "/")
	n := &m.root
	var names []string
	var rs **routes
	for i, seg := range segs {
		last := i == len(segs)-1
		switch {
		case last && seg == "":
			rs = &n.rest // trailing slash: the subtree below
		case last && seg == "{$}":
			n = n.literal("")
			rs = &n.exact
		case strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "...}"):
			if !last {
				panic(fmt.Sprintf("http: pattern %q: {name...} must be the last segment", pattern))
			}
			name := seg[1 : len(seg)-4]
			checkWildcard(pattern, name, names)
			if n.rest != nil && n.rname != name {
				panic(fmt.Sprintf("http: pattern %q: wildcard {%s...} conflicts with {%s...}", pattern, name, n.rname))
			}
			n.rname = name
			names = append(names, name)
			rs = &n.rest
		case strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}"):
			name := seg[1 : len(seg)-1]
			checkWildcard(pattern, name, names)
			if n.param == nil {
				n.param, n.pname = new(rnode), name
			} else if n.pname != name {
				panic(fmt.Sprintf("http: pattern %q: wildcard {%s} conflicts with {%s} at the same position", pattern, name, n.pname))
			}
			names = append(names, name)
			n = n.param
			if last {
				rs = &n.exact
			}
		default:
			if strings.ContainsAny(seg, "{}") {
				panic(fmt.Sprintf("http: pattern %q: a wildcard must be a whole segment", pattern))
			}
			n = n.literal(seg)
			if last {
				rs = &n.exact
			}
		}
	}
	if len(names) > maxPathParams {
		panic(fmt.Sprintf("http: pattern %q has more than %d wildcards", pattern, maxPathParams))
	}
	if *rs == nil {
		*rs = &routes{names: names}
	}
	r := *rs
	if slices.Contains(r.methods, method) {
		panic(fmt.Sprintf("http: pattern %q registered twice", pattern))
	}
	r.methods = append(r.methods, method)
	r.hs = append(r.hs, h)
	r.pats = append(r.pats, pattern)
	r.allow = allowList(r.methods)
	if _, ok := h.(headRouter); ok {
		m.streams = true
	}
}

// HandleFunc registers f for pattern, like Handle.
func (m *Router) HandleFunc(pattern string, f func(w *ResponseWriter, r *Request)) {
	m.Handle(pattern, HandlerFunc(f))
}

// NotFound sets the handler for requests no pattern matches (default: an
// empty 404).
func (m *Router) NotFound(h Handler) { m.notFound = h }

func checkWildcard(pattern, name string, seen []string) {
	if name == "" || !isIdent(name) {
		panic(fmt.Sprintf("http: pattern %q: bad wildcard name %q", pattern, name))
	}
	if slices.Contains(seen, name) {
		panic(fmt.Sprintf("http: pattern %q: wildcard %q used twice", pattern, name))
	}
}

func isIdent(s string) bool {
	for i, c := range s {
		if c != '_' && !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

func (n *rnode) literal(seg string) *rnode {
	for _, c := range n.lit {
		if c.seg == seg {
			return c.node
		}
	}
	c := rchild{seg: seg, node: new(rnode)}
	n.lit = append(n.lit, c)
	return c.node
}

// allowList is the Allow value for a pattern's methods: empty when one of
// them matches every method, HEAD added beside GET.
func allowList(methods []string) string {
	var ms []string
	for _, m := range methods {
		if m == "" {
			return ""
		}
		ms = append(ms, m)
		if m == "GET" && !slices.Contains(methods, "HEAD") {
			ms = append(ms, "HEAD")
		}
	}
	slices.Sort(ms)
	return strings.Join(ms, ", ")
}

// pick returns the handler of rs for method and its pattern, or nil.
func (rs *routes) pick(method []byte) (Handler, string) {
	anyMethod := -1
	for i, m := range rs.methods {
		switch {
		case m == string(method):
			return rs.hs[i], rs.pats[i]
		case m == "":
			anyMethod = i
		}
	}
	if string(method) == "HEAD" {
		for i, m := range rs.methods {
			if m == "GET" {
				return rs.hs[i], rs.pats[i]
			}
		}
	}
	if anyMethod >= 0 {
		return rs.hs[anyMethod], rs.pats[anyMethod]
	}
	return nil, ""
}

// matcher is the state of one match: the request, and the Allow values
// of patterns that matched the path but not the method.
type matcher struct {
	req    *Request
	path   []byte
	method []byte
	allow  *routes // the most specific path match, for a 405
}

// ServeHTTP dispatches the request.
func (m *Router) ServeHTTP(w *ResponseWriter, r *Request) {
	path := r.Path
	if len(path) == 0 {
		path = rootPath
	}
	if path[0] != '/' { // "*" (OPTIONS) or an authority (CONNECT)
		m.miss(w, r, nil)
		return
	}
	mt := matcher{req: r, path: path, method: r.Method}
	r.nparams = 0
	if h := mt.match(&m.root, 1); h != nil {
		h.ServeHTTP(w, r)
		return
	}
	r.nparams = 0
	m.miss(w, r, mt.allow)
}

// streamLimit matches req's route, as ServeHTTP will, and asks its
// handler whether it streams the body.
func (m *Router) streamLimit(r *Request) (int64, bool) {
	if !m.streams {
		return 0, false
	}
	path := r.Path
	if len(path) == 0 {
		path = rootPath
	}
	if path[0] != '/' {
		return 0, false
	}
	mt := matcher{req: r, path: path, method: r.Method}
	h := mt.match(&m.root, 1)
	r.nparams, r.pattern = 0, "" // ServeHTTP matches again
	if hr, ok := h.(headRouter); ok {
		return hr.streamLimit(r)
	}
	return 0, false
}

func (m *Router) miss(w *ResponseWriter, r *Request, allow *routes) {
	if allow != nil {
		w.Header().Set("Allow", allow.allow)
		w.WriteHeader(StatusMethodNotAllowed)
		return
	}
	if m.notFound != nil {
		m.notFound.ServeHTTP(w, r)
		return
	}
	w.WriteHeader(StatusNotFound)
}

// match finds the handler for the path from offset i (just after a '/')
// at node n, most specific first, recording wildcard values in the
// request. It backtracks, so a literal that leads nowhere gives way to a
// wildcard.
func (mt *matcher) match(n *rnode, i int) Handler {
	path := mt.path
	end := i
	for end < len(path) && path[end] != '/' {
		end++
	}
	seg := path[i:end]
	last := end == len(path)
	for _, c := range n.lit {
		if c.seg != string(seg) {
			continue
		}
		if h := mt.descend(c.node, end, last); h != nil {
			return h
		}
	}
	if n.param != nil && len(seg) > 0 {
		k := mt.push(n.pname, i, end)
		if h := mt.descend(n.param, end, last); h != nil {
			return h
		}
		mt.req.nparams = k
	}
	if n.rest != nil {
		k := mt.req.nparams
		if n.rname != "" {
			mt.push(n.rname, i, len(path))
		}
		if h := mt.serve(n.rest); h != nil {
			return h
		}
		mt.req.nparams = k
	}
	return nil
}

// descend continues below node n, whose segment ended at end.
func (mt *matcher) descend(n *rnode, end int, last bool) Handler {
	if last {
		if n.exact != nil {
			return mt.serve(n.exact)
		}
		return nil
	}
	return mt.match(n, end+1)
}

func (mt *matcher) serve(rs *routes) Handler {
	if h, pattern := rs.pick(mt.method); h != nil {
		mt.req.pattern = pattern
		return h
	}
	if mt.allow == nil {
		mt.allow = rs
	}
	return nil
}

// push records a wildcard value and returns the count before it.
func (mt *matcher) push(name string, start, end int) int {
	r := mt.req
	k := r.nparams
	if k < maxPathParams {
		r.params[k] = pathParam{name: name, start: int32(start), end: int32(end)}
		r.nparams++
	}
	return k
}

// Chain wraps h in middleware, the first outermost: Chain(h, a, b) is
// a(b(h)). A middleware is any function from Handler to Handler.
//
// When h is, or routes to, a [StreamBody] handler, the result still lets
// the server see that from the request's head.
func Chain(h Handler, mw ...func(Handler) Handler) Handler {
	inner := h
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	if hr, ok := inner.(headRouter); ok && len(mw) > 0 {
		return &chained{h: h, inner: hr}
	}
	return h
}
