package net

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
)

// expvarSeq makes each test's variable names unique in the process, which
// expvar requires (-count=2 runs the tests twice).
var expvarSeq atomic.Int64

// getVars fetches /debug/vars from srv and decodes the variable name into
// v.
func getVars(srv *httptest.Server, name string, v any) error {
	resp, err := nethttp.Get(srv.URL + "/debug/vars")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(body, &all); err != nil {
		return fmt.Errorf("/debug/vars is not JSON: %w", err)
	}
	raw, ok := all[name]
	if !ok {
		return fmt.Errorf("%s not published", name)
	}
	return json.Unmarshal(raw, v)
}

// PublishExpvar shows each loop's counters at /debug/vars, current at
// every request, and a second publication of the same name panics.
func TestPublishExpvar(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		s := startServer(t, b, &HandlerFuncs{Data: func(c *Conn) { c.Discard(-1) }}, WithLoops(2))
		name := fmt.Sprintf("veloq_net_test_%d", expvarSeq.Add(1))
		PublishExpvar(name, s)
		require.Panics(t, func() { PublishExpvar(name, s) })
		vars := httptest.NewServer(expvar.Handler())
		t.Cleanup(vars.Close)

		for range 3 {
			c := dial(t, s)
			_, err := c.Write([]byte("ping"))
			require.NoError(t, err)
		}
		var loops []Stats
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			var got []Stats
			require.NoError(ct, getVars(vars, name, &got))
			var accepted, in uint64
			for _, l := range got {
				accepted += l.Accepted
				in += l.BytesIn
			}
			require.Equal(ct, uint64(3), accepted)
			require.Equal(ct, uint64(12), in)
			loops = got
		}, 10*time.Second, 10*time.Millisecond)
		require.Len(t, loops, 2)
		for _, l := range loops {
			require.Equal(t, b, l.Backend)
		}
	})
}
