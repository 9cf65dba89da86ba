//go:build unix

package proxy

import (
	"crypto/tls"
	"io"
	"net"
	nethttp "net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/http/client"
	"github.com/veloq/veloq/internal/selfsigned"
	vnet "github.com/veloq/veloq/net"
)

// TLS on both sides: an h2 client over TLS (ALPN) to the proxy, which
// forwards over TLS to an https:// upstream whose certificate it
// verifies; X-Forwarded-Proto says https.
func TestTLSBothSides(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		cert := selfsigned.Shared()
		ln, err := tls.Listen("tcp", "127.0.0.1:0", cert.ServerConfig())
		require.NoError(t, err)
		srv := &nethttp.Server{Handler: nethttp.HandlerFunc(echoStd)}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		_, port, _ := net.SplitHostPort(ln.Addr().String())

		cl, err := client.New(client.WithNumLoops(1), client.WithTLSConfig(cert.ClientConfig("127.0.0.1")))
		require.NoError(t, err)
		t.Cleanup(func() { cl.Close() })
		p := newProxy(t, WithUpstreams("https://127.0.0.1:"+port), WithClient(cl))
		addr := serve(t, b, p, vhttp.WithTLS(cert.ServerConfig()))

		tr := &nethttp.Transport{TLSClientConfig: cert.ClientConfig("127.0.0.1"), ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		c := &nethttp.Client{Transport: tr, Timeout: 10 * time.Second}
		for i := 0; i < 3; i++ {
			resp, err := c.Get("https://" + addr + "/secure")
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, 2, resp.ProtoMajor)
			require.Equal(t, "/secure", resp.Header.Get("X-Path"))
			require.Equal(t, "https", resp.Header.Get("X-Got-X-Forwarded-Proto"))
		}
		require.Equal(t, uint64(1), p.Stats().Upstreams[0].NewConns)
	})
}

// An h2:// upstream: the proxy speaks HTTP/2 over TLS to it (ALPN "h2"),
// several requests over one connection.
func TestH2UpstreamOverTLS(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		cert := selfsigned.Shared()
		sc := cert.ServerConfig().Clone()
		sc.NextProtos = []string{"h2", "http/1.1"}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", sc)
		require.NoError(t, err)
		srv := &nethttp.Server{Handler: nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			w.Header().Set("X-Up-Proto", r.Proto)
			io.WriteString(w, "ok")
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		_, port, _ := net.SplitHostPort(ln.Addr().String())

		cl, err := client.New(client.WithNumLoops(1), client.WithTLSConfig(cert.ClientConfig("127.0.0.1")))
		require.NoError(t, err)
		t.Cleanup(func() { cl.Close() })
		p := newProxy(t, WithUpstreams("h2://127.0.0.1:"+port), WithClient(cl))
		addr := serve(t, b, p)
		c := httpClient()
		for i := 0; i < 3; i++ {
			resp, err := c.Get("http://" + addr + "/")
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, "ok", string(body))
			require.Equal(t, "HTTP/2.0", resp.Header.Get("X-Up-Proto"))
		}
		require.Equal(t, uint64(1), p.Stats().Upstreams[0].NewConns)
	})
}
