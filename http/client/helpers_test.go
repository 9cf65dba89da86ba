package client

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

func forEachBackend(t *testing.T, f func(t *testing.T, b vnet.Backend)) {
	t.Helper()
	backendtest.Run(t, f)
}

// newLoop starts a loop on backend b, closed at the end of the test.
func newLoop(t testing.TB, b vnet.Backend) *vnet.Loop {
	t.Helper()
	l, err := vnet.NewLoop(0, vnet.Config{Backend: b, Logger: backendtest.Logger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// newClient makes a Client on loop l, closed at the end of the test.
func newClient(t testing.TB, l *vnet.Loop, opts ...Option) *Client {
	t.Helper()
	c, err := New(append([]Option{WithLoops([]*vnet.Loop{l})}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// recorder is a ResponseHandler that keeps what it was given (copies).
type recorder struct {
	mu      sync.Mutex
	status  int
	fields  map[string]string
	body    bytes.Buffer
	trailer map[string]string
	err     error
	ended   bool
	heads   int
	interim []int
	onHead  func(call *Call, h *ResponseHead)
	onBody  func(call *Call, p []byte)
}

func (r *recorder) OnResponseHead(call *Call, h *ResponseHead) {
	r.mu.Lock()
	r.heads++
	r.status = h.Status
	r.fields = map[string]string{}
	for _, f := range h.Fields {
		r.fields[http.CanonicalHeaderKey(string(f.Name))] = string(f.Value)
	}
	r.mu.Unlock()
	if r.onHead != nil {
		r.onHead(call, h)
	}
}

func (r *recorder) OnInformational(call *Call, h *ResponseHead) {
	r.mu.Lock()
	r.interim = append(r.interim, h.Status)
	r.mu.Unlock()
}

func (r *recorder) OnResponseBody(call *Call, p []byte) {
	r.mu.Lock()
	r.body.Write(p)
	r.mu.Unlock()
	if r.onBody != nil {
		r.onBody(call, p)
	}
}

func (r *recorder) OnResponseEnd(call *Call, trailer []Field, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trailer = map[string]string{}
	for _, f := range trailer {
		r.trailer[http.CanonicalHeaderKey(string(f.Name))] = string(f.Value)
	}
	r.err = err
	r.ended = true
}

func (r *recorder) done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

// send runs Send on l and waits for the call's end.
func send(t testing.TB, c *Client, l *vnet.Loop, req *Request) *recorder {
	t.Helper()
	r := &recorder{}
	return sendWith(t, c, l, req, r)
}

func sendWith(t testing.TB, c *Client, l *vnet.Loop, req *Request, r *recorder) *recorder {
	t.Helper()
	require.NoError(t, l.Post(func() { c.Send(l, req, r) }))
	require.Eventually(t, r.done, 10*time.Second, time.Millisecond)
	return r
}

// stdUpstream serves h with net/http on 127.0.0.1.
func stdUpstream(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func addrOf(s *httptest.Server) string { return s.Listener.Addr().String() }

// rawUpstream accepts connections on 127.0.0.1 and runs serve for each,
// with its index (0 for the first), on a goroutine.
func rawUpstream(t testing.TB, serve func(c net.Conn, br *bufio.Reader, i int)) string {
	t.Helper()
	return backendtest.ServeTCP(t, func(c net.Conn, i int) { serve(c, bufio.NewReader(c), i) })
}

// readReq reads one request (head and Content-Length body) or fails.
func readReq(br *bufio.Reader) (*http.Request, error) {
	r, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, r.Body)
	return r, err
}

// upOf returns the one upstream's stats (zero if none yet).
func upOf(c *Client) UpstreamStats {
	s := c.Stats()
	if len(s.Upstreams) == 0 {
		return UpstreamStats{}
	}
	return s.Upstreams[0]
}
