package proxy

import (
	"io"
	nethttp "net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
