package http

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// notVersionCases are request lines sorted by whether their third part is
// an HTTP-version at all ("HTTP/" digit "." digit): those that are not
// get ErrNotHTTPVersion, the others the error of what is wrong with them.
var notVersionCases = []struct {
	name, req string
	notHTTP   bool // Parse returns ErrNotHTTPVersion
	status    int  // what Parse's error maps to
}{
	{"h2spec 3.5 invalid preface", "INVALID CONNECTION PREFACE\r\n\r\n", true, 400},
	{"other protocol", "GET / FOO/1.1\r\nHost: x\r\n\r\n", true, 400},
	{"lower-case name", "GET / http/1.1\r\nHost: x\r\n\r\n", true, 400},
	{"letter for major", "GET / HTTP/x.1\r\nHost: x\r\n\r\n", true, 400},
	{"no minor", "GET / HTTP/1\r\nHost: x\r\n\r\n", true, 400},
	{"two-digit major", "GET / HTTP/11.1\r\nHost: x\r\n\r\n", true, 400},
	{"junk after the version", "GET / HTTP/1.1x\r\nHost: x\r\n\r\n", false, 400},
	{"two-digit minor", "GET / HTTP/1.10\r\nHost: x\r\n\r\n", false, 400},
	{"bad method", "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", false, 400},
	{"bad field", "GET / HTTP/1.1\r\nHost: x\r\nBad Field: y\r\n\r\n", false, 400},
	{"HTTP/2.0", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", false, 505},
}

func TestParseNotHTTPVersion(t *testing.T) {
	for _, tt := range notVersionCases {
		t.Run(tt.name, func(t *testing.T) {
			var p Parser
			var req Request
			_, err := p.Parse([]byte(tt.req), &req)
			require.Error(t, err)
			require.Equal(t, tt.notHTTP, errors.Is(err, ErrNotHTTPVersion), "error %v", err)
			require.Equal(t, tt.status, ErrorStatus(err))
			if tt.status == 400 {
				require.ErrorIs(t, err, ErrBadRequest)
			}
		})
	}
	// A version still arriving is not judged early.
	var p Parser
	var req Request
	_, err := p.Parse([]byte("GET / HTT"), &req)
	require.ErrorIs(t, err, ErrNeedMore)
}

// TestServerNotHTTPVersion: with HTTP/2 on, a request line that ends in no
// HTTP-version may be a broken HTTP/2 preface, and the connection closes
// without an HTTP/1.1 answer; with HTTP/2 off it is answered 400 like any
// malformed request. HTTP/1-shaped errors get their status either way.
// Every case counts in Stats().ProtoErrors.
func TestServerNotHTTPVersion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for _, h2on := range []bool{true, false} {
			name := "http2-on"
			if !h2on {
				name = "http2-off"
			}
			t.Run(name, func(t *testing.T) {
				s := startServer(t, b, HandlerFunc(testHandler), WithHTTP2(h2on))
				for _, tt := range notVersionCases {
					t.Run(tt.name, func(t *testing.T) {
						c, br := rawConn(t, s)
						_, err := io.WriteString(c, tt.req)
						require.NoError(t, err)
						if tt.notHTTP && h2on {
							expectClosed(t, c, br)
							return
						}
						resp, _ := readResponse(t, br, "GET")
						require.Equal(t, tt.status, resp.StatusCode)
						require.True(t, resp.Close)
						expectClosed(t, c, br)
					})
				}
				// After a first request was answered the connection is
				// HTTP/1 for sure: the same line gets its 400.
				t.Run("after a request", func(t *testing.T) {
					c, br := rawConn(t, s)
					_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"+notVersionCases[0].req)
					require.NoError(t, err)
					resp, _ := readResponse(t, br, "GET")
					require.Equal(t, 200, resp.StatusCode)
					resp, _ = readResponse(t, br, "GET")
					require.Equal(t, 400, resp.StatusCode)
					expectClosed(t, c, br)
				})
				require.Eventually(t, func() bool {
					return s.Stats().ProtoErrors == uint64(len(notVersionCases))+1
				}, 5*time.Second, 5*time.Millisecond)
			})
		}
	})
}
