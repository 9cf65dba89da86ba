package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// veloq's own server as the upstream: keep-alive reuse, and a body sent
// and echoed.
func TestVeloqUpstream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
			w.Header().Set("X-Method", string(r.Method))
			w.Write(r.Body)
		}), vhttp.WithNetOptions(vnet.WithBackend(b)), vhttp.WithNetOptions(vnet.WithLoops(1)), vhttp.WithLogger(backendtest.Logger(t)))
		require.NoError(t, err)
		a, err := s.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		l := newLoop(t, b)
		c := newClient(t, l)
		for i := range 20 {
			body := []byte(strings.Repeat("b", i*100))
			r := send(t, c, l, &Request{Method: "POST", Addr: a.String(), Target: "/echo", Body: body,
				Header: []Field{{[]byte("X-Test"), []byte("1")}}})
			require.NoError(t, r.err)
			require.Equal(t, "POST", r.fields["X-Method"])
			require.Equal(t, string(body), r.body.String())
		}
		u := upOf(c)
		require.EqualValues(t, 1, u.NewConns)
		require.EqualValues(t, 19, u.ReusedConns)
	})
}

// A chunked body with trailers, from net/http.
func TestChunkedTrailers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := stdUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "X-Sum")
			for i := range 10 {
				fmt.Fprintf(w, "part%d;", i)
				w.(http.Flusher).Flush()
			}
			w.Header().Set("X-Sum", "42")
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		for range 3 {
			r := send(t, c, l, &Request{Method: "GET", Addr: addrOf(up), Target: "/"})
			require.NoError(t, r.err)
			require.Equal(t, "chunked", r.fields["Transfer-Encoding"])
			require.Equal(t, "part0;part1;part2;part3;part4;part5;part6;part7;part8;part9;", r.body.String())
			require.Equal(t, "42", r.trailer["X-Sum"])
		}
		require.EqualValues(t, 1, upOf(c).NewConns)
	})
}

// A large body read with Pause/Resume: no body part arrives while paused,
// and the input the loop buffers stays bounded however large the body.
func TestPauseResumeLargeBody(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		const size = 32 << 20
		up := stdUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			chunk := bytes.Repeat([]byte("z"), 64<<10)
			for n := 0; n < size; n += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		parts := make(chan *Call, 1)
		var paused, violations atomic.Int64
		r := &recorder{}
		r.onBody = func(call *Call, p []byte) {
			if paused.Load() != 0 {
				violations.Add(1)
			}
			paused.Store(1)
			call.Pause()
			parts <- call
		}
		require.NoError(t, l.Post(func() { c.Send(l, &Request{Method: "GET", Addr: addrOf(up), Target: "/"}, r) }))
		for !r.done() {
			select {
			case call := <-parts:
				require.NoError(t, l.Post(func() { paused.Store(0); call.Resume() }))
			case <-time.After(10 * time.Millisecond):
			}
		}
		require.NoError(t, r.err)
		require.Equal(t, size, r.body.Len())
		require.Zero(t, violations.Load())
		peak := l.Stats().PeakConnInput
		t.Logf("peak buffered input %d bytes for a %d-byte body", peak, size)
		require.Less(t, peak, int64(2<<20))
		require.Eventually(t, func() bool { return upOf(c).Idle == 1 }, 10*time.Second, time.Millisecond)
	})
}

// Past WithMaxConnsPerHost requests wait in order; past the queue bound
// they fail at once with ErrQueueFull.
func TestMaxConnsQueue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		release := make(chan struct{})
		up := stdUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			<-release
			w.Write([]byte(r.URL.Path))
		})
		l := newLoop(t, b)
		c := newClient(t, l, WithMaxConnsPerHost(2), WithMaxQueuedPerHost(3))
		recs := make([]*recorder, 6)
		for i := range recs {
			recs[i] = &recorder{}
			req := &Request{Method: "GET", Addr: addrOf(up), Target: fmt.Sprintf("/%d", i)}
			require.NoError(t, l.Post(func() { c.Send(l, req, recs[i]) }))
		}
		require.Eventually(t, recs[5].done, 10*time.Second, time.Millisecond)
		require.ErrorIs(t, recs[5].err, ErrQueueFull)
		u := upOf(c)
		require.Equal(t, 2, u.Open)
		require.Equal(t, 3, u.Queued)
		close(release)
		for i, r := range recs[:5] {
			require.Eventually(t, r.done, 10*time.Second, time.Millisecond)
			require.NoError(t, r.err)
			require.Equal(t, fmt.Sprintf("/%d", i), r.body.String())
		}
		u = upOf(c)
		require.EqualValues(t, 2, u.NewConns)
		require.EqualValues(t, 3, u.ReusedConns)
		require.Equal(t, 0, u.Queued)
	})
}

// newOwnClient makes a Client with its own loops on backend b.
func newOwnClient(t testing.TB, b vnet.Backend, opts ...Option) *Client {
	t.Helper()
	c, err := New(append([]Option{WithBackend(b), WithNumLoops(2)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// Do from a goroutine: head, streamed body, trailers; and a context that
// ends while waiting.
func TestDo(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		const size = 4 << 20
		up := stdUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hang" {
				<-r.Context().Done()
				return
			}
			w.Header().Set("Trailer", "X-End")
			w.Write(bytes.Repeat([]byte("d"), size))
			w.Header().Set("X-End", "yes")
		})
		c := newOwnClient(t, b)
		for range 4 {
			resp, err := c.Do(context.Background(), &Request{Method: "GET", Addr: addrOf(up), Target: "/"})
			require.NoError(t, err)
			require.Equal(t, 200, resp.Status)
			n, err := io.Copy(io.Discard, resp.Body)
			require.NoError(t, err)
			require.EqualValues(t, size, n)
			require.Equal(t, "yes", resp.Trailer.Get("X-End"))
			require.NoError(t, resp.Body.Close())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := c.Do(ctx, &Request{Method: "GET", Addr: addrOf(up), Target: "/hang"})
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

// Transport under http.Client, and under httputil.ReverseProxy.
func TestTransport(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := stdUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Host", r.Host)
			w.Header().Set("Trailer", "X-T")
			fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.RequestURI(), body)
			w.Header().Set("X-T", "t")
		})
		c := newOwnClient(t, b)
		tr := &Transport{Client: c}
		hc := &http.Client{Transport: tr}
		resp, err := hc.Post(up.URL+"/p?q=1", "text/plain", strings.NewReader("payload"))
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, "POST /p?q=1 payload", string(body))
		require.Equal(t, "t", resp.Trailer.Get("X-T"))

		target, _ := url.Parse(up.URL)
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.Transport = tr
		front := httptest.NewServer(rp)
		t.Cleanup(front.Close)
		for i := range 10 {
			resp, err := http.Post(front.URL+fmt.Sprintf("/r/%d", i), "text/plain", strings.NewReader("via proxy"))
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, fmt.Sprintf("POST /r/%d via proxy", i), string(body))
			require.Equal(t, "t", resp.Trailer.Get("X-T"))
		}
		s := c.Stats()
		require.EqualValues(t, 11, s.Requests)
		require.Zero(t, s.Errors)
		require.LessOrEqual(t, s.NewConns, uint64(2)) // one per loop at most
	})
}

// A TLS upstream: verification is on by default, and passes with the
// test's CA; InsecureSkipVerify only when the config says so.
func TestTLSUpstream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "tls %s", r.Proto)
		}))
		t.Cleanup(up.Close)
		l := newLoop(t, b)

		def := newClient(t, l)
		r := send(t, def, l, &Request{Method: "GET", Addr: addrOf(up), TLS: true, Target: "/"})
		require.ErrorIs(t, r.err, ErrDial)
		require.ErrorContains(t, r.err, "certificate")

		pool := x509.NewCertPool()
		pool.AddCert(up.Certificate())
		c := newClient(t, l, WithTLSConfig(&tls.Config{RootCAs: pool}))
		for range 3 {
			r = send(t, c, l, &Request{Method: "GET", Addr: addrOf(up), TLS: true, Target: "/"})
			require.NoError(t, r.err)
			require.Equal(t, "tls HTTP/1.1", r.body.String())
		}
		require.EqualValues(t, 1, upOf(c).NewConns)

		insecure := newClient(t, l, WithTLSConfig(&tls.Config{InsecureSkipVerify: true}))
		r = send(t, insecure, l, &Request{Method: "GET", Addr: addrOf(up), TLS: true, Target: "/"})
		require.NoError(t, r.err)
	})
}

// Do's body is paced: a reader that does not read leaves at most about
// BodyBuffer bytes buffered (the call is paused), then reads it all.
func TestDoPacedBody(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		const size = 32 << 20
		up := stdUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			chunk := bytes.Repeat([]byte("p"), 64<<10)
			for n := 0; n < size; n += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		})
		c := newOwnClient(t, b)
		resp, err := c.Do(context.Background(), &Request{Method: "GET", Addr: addrOf(up), Target: "/"})
		require.NoError(t, err)
		d := resp.Body.(*doBody).d
		buffered := func() (int, bool) {
			d.mu.Lock()
			defer d.mu.Unlock()
			return len(d.buf), d.paused
		}
		require.Eventually(t, func() bool { _, p := buffered(); return p }, 10*time.Second, time.Millisecond)
		n, _ := buffered()
		require.Less(t, n, 2*BodyBuffer+1<<20, "buffered while the reader is behind")
		got, err := io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.EqualValues(t, size, got)
		require.NoError(t, resp.Body.Close())
	})
}

// Concurrent on-loop chains over two loops keep to their pools: new
// connections are bounded by the concurrency, every other request reuses
// one (the target is ≥ 99.9 % reuse at steady state).
func TestReuseUnderConcurrency(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
			w.WriteString("ok")
		}), vhttp.WithNetOptions(vnet.WithBackend(b)), vhttp.WithNetOptions(vnet.WithLoops(1)), vhttp.WithLogger(backendtest.Logger(t)))
		require.NoError(t, err)
		a, err := s.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		loops := []*vnet.Loop{newLoop(t, b), newLoop(t, b)}
		c, err := New(WithLoops(loops))
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		const chains, each = 8, 250
		var all []*chain
		for i := range chains {
			l := loops[i%2]
			ch := &chain{c: c, l: l, left: each, done: make(chan struct{}),
				req: Request{Method: "GET", Addr: a.String(), Target: "/"}}
			all = append(all, ch)
			require.NoError(t, l.Post(func() { c.Send(l, &ch.req, ch) }))
		}
		for _, ch := range all {
			select {
			case <-ch.done:
				require.NoError(t, ch.err)
			case <-time.After(30 * time.Second):
				t.Fatal("chain did not finish")
			}
		}
		st := c.Stats()
		require.EqualValues(t, chains*each, st.Requests)
		require.Zero(t, st.Errors)
		require.LessOrEqual(t, st.NewConns, uint64(chains))
		reuse := float64(st.ReusedConns) / float64(st.Requests)
		t.Logf("%d requests, %d new connections, reuse %.4f", st.Requests, st.NewConns, reuse)
		require.GreaterOrEqual(t, reuse, 0.99)
	})
}
