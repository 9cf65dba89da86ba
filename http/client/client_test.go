package client

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// Keep-alive: sequential requests on one loop use one connection.
func TestKeepAliveReuse(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var conns int
		up := stdUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello %s", r.URL.Path)
		})
		up.Config.ConnState = nil
		l := newLoop(t, b)
		c := newClient(t, l)
		_ = conns
		const n = 50
		for i := range n {
			r := send(t, c, l, &Request{Method: "GET", Addr: addrOf(up), Target: fmt.Sprintf("/%d", i)})
			require.NoError(t, r.err)
			require.Equal(t, 200, r.status)
			require.Equal(t, fmt.Sprintf("hello /%d", i), r.body.String())
		}
		s := c.Stats()
		require.EqualValues(t, n, s.Requests)
		require.EqualValues(t, 1, s.NewConns)
		require.EqualValues(t, n-1, s.ReusedConns)
		require.EqualValues(t, 0, s.Errors)
	})
}
