package http

import (
	"bytes"
	"fmt"
	"io"
	nethttp "net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// headWith returns a GET with a target of targetLen bytes and fields
// header fields, Host included.
func headWith(targetLen, fields int) string {
	var b strings.Builder
	b.WriteString("GET /" + strings.Repeat("a", targetLen-1) + " HTTP/1.1\r\nHost: x\r\n")
	for i := 1; i < fields; i++ {
		fmt.Fprintf(&b, "X-F%d: v\r\n", i)
	}
	b.WriteString("\r\n")
	return b.String()
}

// The defaults accept what RFC 9112 §3 and real proxies need: a request
// line of 8,000 octets and 100 header fields.
// TestLimitsDefaultsMatchCore: a zero Limits means DefaultLimits both here
// and in the protocol core, which resolves the limits of the chunked
// decoder and of the parser.
func TestLimitsDefaultsMatchCore(t *testing.T) {
	var zero Limits
	d := DefaultLimits()
	require.Equal(t, d.MaxHeaderBytes, zero.maxHeaderBytes())
	require.Equal(t, d.MaxTargetBytes, zero.maxTargetBytes())
	require.Equal(t, d.MaxHeaders, zero.maxHeaders())
	require.Equal(t, d.MaxBodyBytes, zero.maxBodyBytes())
}

func TestServerDefaultLimits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		ok := HandlerFunc(func(w *ResponseWriter, r *Request) {
			fmt.Fprintf(w, "%d %d", len(r.Target), len(r.Headers))
		})
		s := startServer(t, b, ok)
		for _, tc := range []struct {
			target, fields, status int
		}{
			{8000, 100, 200},
			{DefaultMaxTargetBytes, 1, 200},
			{DefaultMaxTargetBytes + 1, 1, 414},
			{10, 101, 431},
		} {
			c, br := rawConn(t, s)
			io.WriteString(c, headWith(tc.target, tc.fields))
			resp, body := readResponse(t, br, "GET")
			require.Equal(t, tc.status, resp.StatusCode, "target %d, %d fields", tc.target, tc.fields)
			if tc.status == 200 {
				require.Equal(t, fmt.Sprintf("%d %d", tc.target, tc.fields), body)
			}
		}
	})
}

// A streamed FromStd body is not bound by the server's MaxBodyBytes: it
// has its own limit, none by default.
func TestFromStdBodyLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		count := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			n, err := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "%d %v", n, err)
		})
		post := func(s *Server, size int, chunked bool) (int, string) {
			c, br := rawConn(t, s)
			if chunked {
				fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n", size)
				go func() {
					c.Write(bytes.Repeat([]byte("z"), size))
					io.WriteString(c, "\r\n0\r\n\r\n")
				}()
			} else {
				fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size)
				go c.Write(bytes.Repeat([]byte("z"), size))
			}
			resp, body := readResponse(t, br, "POST")
			return resp.StatusCode, body
		}

		// Default: unlimited, past the server-wide 4 MiB.
		s := startServer(t, b, FromStd(count), WithRequestLimits(Limits{MaxBodyBytes: 1000}))
		for _, chunked := range []bool{false, true} {
			status, body := post(s, DefaultMaxBodyBytes+1, chunked)
			require.Equal(t, 200, status)
			require.Equal(t, fmt.Sprintf("%d <nil>", DefaultMaxBodyBytes+1), body)
		}

		// Bounded.
		s = startServer(t, b, FromStd(count, WithStdMaxBodyBytes(1000)))
		status, body := post(s, 1000, false)
		require.Equal(t, 200, status)
		require.Equal(t, "1000 <nil>", body)
		status, _ = post(s, 1001, false)
		require.Equal(t, StatusRequestEntityTooLarge, status)
		status, _ = post(s, 1001, true)
		require.Equal(t, StatusRequestEntityTooLarge, status)
	})
}
