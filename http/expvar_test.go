package http

import (
	"encoding/json"
	"expvar"
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vnet "github.com/veloq/veloq/net"
)

// expvarSeq makes each test's variable names unique in the process, which
// expvar requires (-count=2 runs the tests twice).
var expvarSeq atomic.Int64

// PublishExpvar shows the server's counters at /debug/vars, current at
// every request, and a second publication of the same name panics.
func TestPublishExpvar(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler))
		name := fmt.Sprintf("veloq_http_test_%d", expvarSeq.Add(1))
		PublishExpvar(name, s)
		require.Panics(t, func() { PublishExpvar(name, s) })
		vars := httptest.NewServer(expvar.Handler())
		t.Cleanup(vars.Close)

		client := newClient()
		defer client.CloseIdleConnections()
		for _, path := range []string{"/", "/", "/panic"} {
			resp, err := client.Get("http://" + s.Addr().String() + path)
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			resp, err := nethttp.Get(vars.URL + "/debug/vars")
			require.NoError(ct, err)
			defer resp.Body.Close()
			var all map[string]json.RawMessage
			require.NoError(ct, json.NewDecoder(resp.Body).Decode(&all), "/debug/vars is not JSON")
			require.Contains(ct, all, name)
			var st Stats
			require.NoError(ct, json.Unmarshal(all[name], &st))
			assert.Equal(ct, uint64(2), st.Requests) // a panicked request is counted in Panics
			assert.Equal(ct, uint64(1), st.Panics)
			assert.GreaterOrEqual(ct, st.Accepted, uint64(1))
		}, 10*time.Second, 10*time.Millisecond)
	})
}
