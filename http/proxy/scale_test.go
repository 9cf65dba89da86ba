//go:build unix

package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/http/client"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// scaleChildEnv, when set to "ADDR N", makes TestManyClientsSmallPool the
// client side: a child process that opens the N connections, so that
// neither process needs more than about N descriptors (the limit here is
// 20,000 per process, and the proxy holds N accepted ones).
const scaleChildEnv = "VELOQ_TEST_PROXY_SCALE_CHILD"

const (
	scaleClients  = 10000
	scaleLoops    = 2
	scalePoolSize = 16 // per loop
)

// 10,000 clients, each with a request in flight at the same moment,
// through a proxy whose pool to the one upstream is 16 connections per
// loop (issue #32): the upstream holds every answer until the proxy has
// all 10,000 requests in flight (so they really are concurrent, 9,968 of
// them waiting in the pools' queues); then every client gets its own
// answer, the upstream has accepted no more than the bound's
// connections, and once the clients and the proxy are gone no descriptor
// is left. The portable backend holds two descriptors per connection, so
// it gets as many clients as the descriptor limit leaves room for
// (9,500 under a limit of 20,000).
func TestManyClientsSmallPool(t *testing.T) {
	if spec := os.Getenv(scaleChildEnv); spec != "" {
		scaleChild(t, spec)
		return
	}
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		n, perConn := scaleClients, 1
		if b == "portable" {
			// It holds two descriptors per connection (net.FileConn's
			// duplicate): under a 20,000 limit, fewer clients.
			perConn = 2
			n = min(n, int(raiseNoFile(t)-1000)/perConn)
			t.Logf("portable: %d clients (two descriptors per connection)", n)
		}
		if lim := raiseNoFile(t); lim < uint64(n)+1000 {
			t.Skipf("descriptor limit %d, below the %d the proxy's process needs", lim, n+1000)
		}
		before := backendtest.CountFDs(t)
		// Registered first, so it runs after every other cleanup: the
		// proxy, its server, the client and the upstream are closed.
		t.Cleanup(func() {
			require.Eventually(t, func() bool { return backendtest.CountFDs(t) <= before }, 10*time.Second, 5*time.Millisecond,
				"descriptors left: %d, were %d", backendtest.CountFDs(t), before)
		})

		gate := make(chan struct{})
		var openGate sync.Once
		t.Cleanup(func() { openGate.Do(func() { close(gate) }) })
		up, accepted := countingUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, "answer "+r.URL.Path)
		})

		cl, err := client.New(client.WithNumLoops(1), client.WithMaxConnsPerHost(scalePoolSize),
			client.WithMaxQueuedPerHost(scaleClients))
		require.NoError(t, err)
		t.Cleanup(func() { cl.Close() })
		p := newProxy(t, WithUpstreams(up), WithClient(cl), WithTimeout(time.Minute))
		addr := serveLoops(t, b, scaleLoops, p, vhttp.WithReadHeaderTimeout(time.Minute))

		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestManyClientsSmallPool$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d", scaleChildEnv, addr, n))
		var out backendtest.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()

		require.Eventually(t, func() bool { return p.Stats().InFlight == int64(n) }, 40*time.Second, 5*time.Millisecond,
			"requests in flight at once: %d of %d; child: %s", p.Stats().InFlight, n, out.String())
		openGate.Do(func() { close(gate) })
		require.NoError(t, <-done, "child: %s", out.String())

		require.LessOrEqual(t, accepted.Load(), int64(scaleLoops*scalePoolSize), "upstream connections")
		require.GreaterOrEqual(t, accepted.Load(), int64(scalePoolSize), "a full pool on at least one loop")
		st := p.Stats()
		require.Equal(t, uint64(n), st.Upstreams[0].Requests)
		require.Zero(t, st.Upstreams[0].ResetErrors+st.Upstreams[0].ConnectErrors+st.Upstreams[0].BadResponses+st.Upstreams[0].Timeouts)
		// The accepted client connections are closed already, with the
		// proxy still up: left are its listener, loops and pool (both
		// ends of each pooled connection are in this process).
		pool := (perConn + 1) * scaleLoops * scalePoolSize
		require.Eventually(t, func() bool { return backendtest.CountFDs(t) <= before+pool+32 }, 10*time.Second, 5*time.Millisecond,
			"descriptors with the clients gone: %d, were %d", backendtest.CountFDs(t), before)
	})
}

// raiseNoFile raises the soft descriptor limit to the hard one and
// returns it.
func raiseNoFile(t *testing.T) uint64 {
	t.Helper()
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	}
	return uint64(lim.Cur) // int64 on FreeBSD
}

// serveLoops is serve with n loops.
func serveLoops(t *testing.T, b vnet.Backend, n int, h vhttp.Handler, opts ...vhttp.Option) string {
	t.Helper()
	return serve(t, b, h, append([]vhttp.Option{vhttp.WithNetOptions(vnet.WithLoops(n))}, opts...)...)
}

// countingUpstream serves h with net/http on 127.0.0.1:0 and counts the
// connections it accepts.
func countingUpstream(t *testing.T, h nethttp.HandlerFunc) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var n atomic.Int64
	srv := &nethttp.Server{Handler: h, ConnState: func(_ net.Conn, s nethttp.ConnState) {
		if s == nethttp.StateNew {
			n.Add(1)
		}
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), &n
}

// scaleChild opens the connections spec ("ADDR N") names, 256 connects
// at a time so the proxy's accept queue does not overflow, sends one
// request on each as soon as it is connected and checks each answer.
func scaleChild(t *testing.T, spec string) {
	var addr string
	var n int
	_, err := fmt.Sscanf(spec, "%s %d", &addr, &n)
	require.NoError(t, err)
	dials := make(chan struct{}, 256)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- scaleOne(addr, i, dials)
		}()
	}
	wg.Wait()
	close(errs)
	var failed int
	var first error
	for err := range errs {
		if err != nil {
			if first == nil {
				first = err
			}
			failed++
		}
	}
	require.Zero(t, failed, "%d of %d clients failed; first: %v", failed, n, first)
}

// scaleOne is one client: GET /i, answer "answer /i".
func scaleOne(addr string, i int, dials chan struct{}) error {
	dials <- struct{}{}
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	<-dials
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(45 * time.Second))
	path := "/" + strconv.Itoa(i)
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return err
	}
	resp, err := nethttp.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return fmt.Errorf("client %d: %w", i, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("client %d: body: %w", i, err)
	}
	if resp.StatusCode != 200 || string(body) != "answer "+path {
		return fmt.Errorf("client %d: %d %q", i, resp.StatusCode, body)
	}
	return nil
}
