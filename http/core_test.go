package http

import (
	"io"
	"net"
	nethttp "net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/http/internal/h1"
	vnet "github.com/veloq/veloq/net"
)

// TestCoreTypesConvert: the protocol core's Field, Error and Limits
// convert to this package's HeaderField, ProtocolError and Limits, as
// the server relies on (coreError, the parser's and decoder's limits);
// this stops compiling if their fields drift apart.
func TestCoreTypesConvert(t *testing.T) {
	f := HeaderField(h1.Field{Name: []byte("a"), Value: []byte("b")})
	require.Equal(t, "a", string(f.Name))
	l := h1.Limits(Limits{MaxHeaders: 3})
	require.Equal(t, 3, l.Headers())
	var err error = (*ProtocolError)(h1.ErrBodyTooLarge)
	require.ErrorIs(t, err, ErrBodyTooLarge)
	require.Equal(t, StatusRequestEntityTooLarge, ErrorStatus(err))
	require.Equal(t, h1.ErrBodyTooLarge.Error(), err.Error())
}

// TestFromStdChunkedErrorIsProtocolError: a FromStd handler reading a
// malformed chunked body gets a *ProtocolError that errors.Is matches
// against ErrBadRequest, although the chunked decoder lives in
// http/internal/h1 and returns its own error type.
func TestFromStdChunkedErrorIsProtocolError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		got := make(chan error, 1)
		h := FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			_, err := io.ReadAll(r.Body)
			got <- err
		}))
		s := startServer(t, b, h)
		c, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"+
			"3\r\nabc\r\nzz\r\n")
		require.NoError(t, err)
		select {
		case err := <-got:
			var pe *ProtocolError
			require.ErrorAs(t, err, &pe)
			require.ErrorIs(t, err, ErrBadRequest)
			require.Equal(t, StatusBadRequest, pe.Status)
		case <-time.After(10 * time.Second):
			t.Fatal("the handler's Body.Read did not fail")
		}
	})
}
