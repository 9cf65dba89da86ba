//go:build unix

package proxy

import (
	"bufio"
	"io"
	"net"
	nethttp "net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/veloq/veloq/http/internal/upstreamtest"
	vnet "github.com/veloq/veloq/net"
)

// An HTTP/2 client (h2c, prior knowledge) through the proxy to an
// HTTP/1.1 upstream: many streams over one connection, bodies both ways.
func TestH2CFront(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := stdUpstream(t, echoStd)
		p := newProxy(t, WithUpstreams(up), WithVia("veloq"))
		addr := serve(t, b, p)
		tr := &nethttp.Transport{Protocols: new(nethttp.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		defer tr.CloseIdleConnections()
		c := &nethttp.Client{Transport: tr, Timeout: 10 * time.Second}
		for i := 0; i < 5; i++ {
			resp, err := c.Post("http://"+addr+"/up?i=1", "text/plain", strings.NewReader(strings.Repeat("b", 40000)))
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, 2, resp.ProtoMajor)
			require.Equal(t, 200, resp.StatusCode)
			require.Len(t, body, 40000)
			require.Equal(t, "/up?i=1", resp.Header.Get("X-Path"))
			require.Equal(t, "2 veloq", resp.Header.Get("X-Got-Via"))
			require.Equal(t, addr, resp.Header.Get("X-Host"))
		}
	})
}

// h2cStdUpstream serves h over h2c with net/http on 127.0.0.1 and counts
// its connections.
func h2cStdUpstream(t *testing.T, h nethttp.HandlerFunc) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	conns := new(atomic.Int32)
	srv := &nethttp.Server{Handler: h, Protocols: new(nethttp.Protocols), ConnState: func(_ net.Conn, st nethttp.ConnState) {
		if st == nethttp.StateNew {
			conns.Add(1)
		}
	}}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), conns
}

// An h2c client through the proxy to an h2c upstream (an h2c:// address):
// requests multiplexed over one upstream connection, bodies both ways,
// and the upstream's trailers (gRPC's grpc-status) passed through.
func TestH2CUpstream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up, conns := h2cStdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Trailer", "Grpc-Status")
			w.Header().Set("X-Up-Proto", r.Proto)
			w.Write(body)
			w.Header().Set("Grpc-Status", "0")
		})
		p := newProxy(t, WithUpstreams("h2c://"+up), WithVia("veloq"))
		addr := serve(t, b, p)
		tr := &nethttp.Transport{Protocols: new(nethttp.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		defer tr.CloseIdleConnections()
		c := &nethttp.Client{Transport: tr, Timeout: 10 * time.Second}
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := nethttp.NewRequest("POST", "http://"+addr+"/svc", strings.NewReader(strings.Repeat("b", 30000)))
				req.Header.Set("TE", "trailers")
				resp, err := c.Do(req)
				if !assert.NoError(t, err) {
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.NoError(t, err)
				assert.Equal(t, 200, resp.StatusCode)
				assert.Len(t, body, 30000)
				assert.Equal(t, "HTTP/2.0", resp.Header.Get("X-Up-Proto"))
				assert.Equal(t, "0", resp.Trailer.Get("Grpc-Status"))
				assert.Equal(t, "2 veloq", resp.Header.Get("Via"))
			}()
		}
		wg.Wait()
		require.EqualValues(t, 1, conns.Load(), "one upstream connection per loop")
	})
}

// An h2c upstream whose DATA goes past its content-length (malformed,
// RFC 9113 section 8.1.1; the client library passes the bytes on) is a
// bad reply, not a client gone: the client's answer is cut, so its
// connection closes, rather than left open until the server's stall
// timeout, and the upstream is charged for it.
func TestH2CUpstreamBodyPastContentLength(t *testing.T) {
	up := upstreamtest.RawH2(t, func(fr *http2.Framer, enc func(...string) []byte, id uint32, _ int) {
		block := enc(":status", "200", "content-length", "4")
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true})
		_ = fr.WriteData(id, true, []byte("abcdefgh"))
	})
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		p := newProxy(t, WithUpstreams("h2c://"+up))
		addr := serve(t, b, p)
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		br := bufio.NewReader(c)
		resp, err := nethttp.ReadResponse(br, nil)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, "abcd", string(body), "what was announced went out")
		_, err = br.ReadByte()
		require.Error(t, err)
		require.False(t, os.IsTimeout(err), "the answer is cut: its connection closes")
		st := p.Stats().Upstreams[0]
		require.Equal(t, uint64(1), st.BadResponses)
		require.Zero(t, st.Canceled, "the client did not leave")
	})
}
