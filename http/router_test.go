package http

import (
	"fmt"
	"io"
	nethttp "net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// routeTable is the router every test here uses: each handler answers
// with its name and the wildcard values it sees.
func routeTable() *Router {
	m := NewRouter()
	reply := func(name string, wild ...string) HandlerFunc {
		return func(w *ResponseWriter, r *Request) {
			w.WriteString(name)
			for _, k := range wild {
				w.WriteString(" ")
				w.WriteString(k)
				w.WriteString("=")
				w.Write(r.PathValue(k))
			}
		}
	}
	m.Handle("GET /{$}", reply("home"))
	m.Handle("GET /users/{id}", reply("user", "id"))
	m.Handle("PUT /users/{id}", reply("put-user", "id"))
	m.Handle("GET /users/me", reply("me"))
	m.Handle("GET /users/{id}/posts/{post}", reply("post", "id", "post"))
	m.Handle("/files/{path...}", reply("files", "path"))
	m.Handle("POST /files/upload", reply("upload"))
	m.Handle("/static/", reply("static"))
	m.Handle("GET /static/logo.png", reply("logo"))
	m.Handle("DELETE /items/{id}", reply("delete-item", "id"))
	return m
}

func TestRouterMatch(t *testing.T) {
	m := routeTable()
	tests := []struct {
		method, target string
		status         int
		body, allow    string
	}{
		{"GET", "/", 200, "home", ""},
		{"HEAD", "/", 200, "home", ""},
		{"POST", "/", 405, "", "GET, HEAD"},
		{"GET", "/users/42", 200, "user id=42", ""},
		{"PUT", "/users/42", 200, "put-user id=42", ""},
		{"GET", "/users/me", 200, "me", ""},             // literal over wildcard
		{"PUT", "/users/me", 200, "put-user id=me", ""}, // the literal has no PUT: the wildcard does
		{"DELETE", "/users/42", 405, "", "GET, HEAD, PUT"},
		{"GET", "/users/42/posts/7", 200, "post id=42 post=7", ""},
		{"GET", "/users/me/posts/7", 200, "post id=me post=7", ""}, // backtracks from the literal
		{"GET", "/users/", 404, "", ""},                            // {id} needs a non-empty segment
		{"GET", "/users/42/", 404, "", ""},
		{"GET", "/files/a/b/c.txt?x=1", 200, "files path=a/b/c.txt", ""},
		{"GET", "/files/", 200, "files path=", ""},
		{"POST", "/files/upload", 200, "upload", ""},
		{"GET", "/files/upload", 200, "files path=upload", ""}, // methodless wildcard serves other methods
		{"GET", "/static/css/site.css", 200, "static", ""},
		{"GET", "/static/logo.png", 200, "logo", ""},
		{"POST", "/static/logo.png", 200, "static", ""},
		{"GET", "/static", 404, "", ""},
		{"GET", "/items/3", 405, "", "DELETE"},
		{"GET", "/nothing", 404, "", ""},
		{"GET", "http://example.com/users/5", 200, "user id=5", ""}, // absolute form
		{"OPTIONS", "*", 404, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			var req Request
			var p parser
			_, err := p.Parse([]byte(tc.method+" "+tc.target+" HTTP/1.1\r\nHost: x\r\n\r\n"), &req)
			require.NoError(t, err)
			var w ResponseWriter
			w.reset(nil, nil)
			m.ServeHTTP(&w, &req)
			require.Equal(t, tc.status, w.Status())
			require.Equal(t, tc.body, string(w.Body()))
			require.Equal(t, tc.allow, string(w.Header().Get("Allow")))
		})
	}
}

func TestRouterBadPatterns(t *testing.T) {
	for _, p := range []string{
		"users", "GET users/{id}", "/a/{id}x", "/a/{}", "/a/{1x}", "/{a...}/b",
		"/a/{x}/{x}", "/1/2/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}", "G@T /",
	} {
		require.Panics(t, func() { NewRouter().Handle(p, HandlerFunc(func(*ResponseWriter, *Request) {})) }, p)
	}
	m := NewRouter()
	m.HandleFunc("GET /a/{x}", func(*ResponseWriter, *Request) {})
	require.Panics(t, func() { m.HandleFunc("GET /a/{x}", func(*ResponseWriter, *Request) {}) }, "twice")
	require.Panics(t, func() { m.HandleFunc("GET /a/{y}", func(*ResponseWriter, *Request) {}) }, "renamed wildcard")
}

// A match allocates nothing, wildcards included.
func TestRouterMatchAllocs(t *testing.T) {
	m := routeTable()
	var req Request
	var p parser
	_, err := p.Parse([]byte("GET /users/42/posts/7 HTTP/1.1\r\nHost: x\r\n\r\n"), &req)
	require.NoError(t, err)
	var w ResponseWriter
	w.reset(nil, make([]byte, 0, 64))
	allocs := testing.AllocsPerRun(100, func() {
		w.resp.Reset(w.resp.Body())
		m.ServeHTTP(&w, &req)
	})
	require.Zero(t, allocs)
	require.Equal(t, "post id=42 post=7", string(w.Body()))
}

// End to end on both backends: routes with middleware, HEAD without a
// body, 405 with Allow, an Offloaded route and a FromStd route that both
// still see the wildcard values.
func TestRouterServer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		m := routeTable()
		m.Handle("GET /heavy/{n}", Offloaded(testPool(t), HandlerFunc(func(w *ResponseWriter, r *Request) {
			fmt.Fprintf(w, "heavy n=%s", r.PathValue("n"))
		})))
		m.Handle("GET /std/{name}", FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			fmt.Fprintf(w, "std name=%s", r.PathValue("name"))
		})))
		tag := func(next Handler) Handler {
			return HandlerFunc(func(w *ResponseWriter, r *Request) {
				w.Header().Set("X-Tag", "1")
				next.ServeHTTP(w, r)
			})
		}
		s := startServer(t, b, Chain(m, tag))
		c, br := rawConn(t, s)
		for _, tc := range []struct {
			method, target, body string
			status               int
		}{
			{"GET", "/users/9", "user id=9", 200},
			{"HEAD", "/users/9", "", 200},
			{"GET", "/heavy/3", "heavy n=3", 200},
			{"GET", "/std/bob", "std name=bob", 200},
			{"PATCH", "/users/9", "", 405},
			{"GET", "/missing", "", 404},
		} {
			io.WriteString(c, tc.method+" "+tc.target+" HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, body := readResponse(t, br, tc.method)
			require.Equal(t, tc.status, resp.StatusCode, tc.target)
			require.Equal(t, tc.body, body, tc.target)
			require.Equal(t, "1", resp.Header.Get("X-Tag"), tc.target)
			if tc.status == 405 {
				require.Equal(t, "GET, HEAD, PUT", resp.Header.Get("Allow"))
			}
			if tc.method == "HEAD" {
				require.Equal(t, int64(len("user id=9")), resp.ContentLength)
			}
		}
	})
}

// FuzzRouterMatch builds a pattern from the fuzzed shape and words, and a
// path that fills it in: literal segments as written, a value for each
// {name}, any rest for a trailing slash or {name...}. The router with that
// one pattern must serve the path with it and give back every wildcard's
// value; the path with a literal segment changed must get 404, and a GET
// pattern must answer POST with 405 and Allow.
func FuzzRouterMatch(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1}, "users,42,posts,7", uint8(0))
	f.Add([]byte{0}, "files,a/b/c.txt", uint8(2))
	f.Add([]byte{1, 1}, "a,..,%2F", uint8(5))
	f.Add([]byte{}, "", uint8(3))
	f.Add([]byte{0, 0}, "static,x,css/site.css", uint8(1))
	f.Fuzz(func(t *testing.T, shape []byte, words string, end uint8) {
		ws := strings.Split(words, ",")
		word := func(i int) string {
			if i < len(ws) {
				return ws[i]
			}
			return ""
		}
		// Up to 7 segments, so that with {rest...} there are at most 8
		// wildcards.
		shape = shape[:min(len(shape), 7)]
		var pattern, path strings.Builder
		values := map[string]string{}
		for i, b := range shape {
			if b%2 == 0 { // a literal: no '/', braces or space, not empty
				lit := strings.Map(func(r rune) rune {
					if strings.ContainsRune("/{} ", r) {
						return -1
					}
					return r
				}, word(i))
				if lit == "" {
					lit = "x"
				}
				pattern.WriteString("/" + lit)
				path.WriteString("/" + lit)
				continue
			}
			name := "p" + strconv.Itoa(i)
			v := strings.ReplaceAll(word(i), "/", "")
			if v == "" {
				v = "v"
			}
			values[name] = v
			pattern.WriteString("/{" + name + "}")
			path.WriteString("/" + v)
		}
		rest := word(len(shape))
		switch end % 4 {
		case 0: // the last segment is the end
			if len(shape) == 0 {
				pattern.WriteString("/{$}")
				path.WriteString("/")
			}
		case 1: // a subtree
			pattern.WriteString("/")
			path.WriteString("/" + rest)
		case 2:
			pattern.WriteString("/{rest...}")
			path.WriteString("/" + rest)
			values["rest"] = rest
		case 3:
			pattern.WriteString("/{$}")
			path.WriteString("/")
		}
		pat := pattern.String()
		if end&4 != 0 {
			pat = "GET " + pat
		}

		m := NewRouter()
		served := false
		m.HandleFunc(pat, func(w *ResponseWriter, r *Request) {
			served = true
			if r.pattern != pat {
				t.Errorf("pattern %q, want %q", r.pattern, pat)
			}
			for name, want := range values {
				if got := string(r.PathValue(name)); got != want {
					t.Errorf("%s = %q, want %q (path %q, pattern %q)", name, got, want, r.Path, pat)
				}
			}
		})
		serve := func(method, path string) *ResponseWriter {
			req := Request{Method: []byte(method), Path: []byte(path)}
			var w ResponseWriter
			w.reset(nil, nil)
			m.ServeHTTP(&w, &req)
			return &w
		}

		if w := serve("GET", path.String()); !served || w.Status() != StatusOK {
			t.Fatalf("GET %q: status %d, not served by %q", path.String(), w.Status(), pat)
		}
		if end&4 != 0 {
			served = false
			if w := serve("POST", path.String()); served || w.Status() != StatusMethodNotAllowed || string(w.Header().Get("Allow")) != "GET, HEAD" {
				t.Fatalf("POST %q to %q: status %d, Allow %q", path.String(), pat, w.Status(), w.Header().Get("Allow"))
			}
		}
		for i, b := range shape {
			if b%2 != 0 {
				continue
			}
			// The path with literal segment i changed: append a byte no
			// literal has.
			segs := strings.SplitN(path.String(), "/", len(shape)+2)
			segs[i+1] += "{"
			bad := strings.Join(segs, "/")
			served = false
			if w := serve("GET", bad); served || w.Status() != StatusNotFound {
				t.Fatalf("GET %q: status %d, served %v by %q", bad, w.Status(), served, pat)
			}
			break
		}
	})
}
