package http

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2/hpack"

	"github.com/veloq/veloq/http/internal/h1"
	"github.com/veloq/veloq/http/internal/h2"
	vnet "github.com/veloq/veloq/net"
)

// notVersionCases are request lines sorted by whether their third part is
// an HTTP-version at all ("HTTP/" digit "." digit): those that are not
// get errNotHTTPVersion, the others the error of what is wrong with them.
// silentH2 marks the lines that are no HTTP/1 request line at all, which
// a server with HTTP/2 on closes without an answer as a broken preface.
var notVersionCases = []struct {
	name, req string
	notHTTP   bool // Parse returns errNotHTTPVersion
	status    int  // what Parse's error maps to
	silentH2  bool // closed unanswered as the first line with HTTP/2 on
}{
	{"h2spec 3.5 invalid preface", "INVALID CONNECTION PREFACE\r\n\r\n", true, 400, true},
	{"preface gone wrong", "PRI * FOO\r\n\r\nSM\r\n\r\n", true, 400, true},
	{"other protocol", "GET / FOO/1.1\r\nHost: x\r\n\r\n", true, 400, false},
	{"lower-case name", "GET / http/1.1\r\nHost: x\r\n\r\n", true, 400, false},
	{"letter for major", "GET / HTTP/x.1\r\nHost: x\r\n\r\n", true, 400, false},
	{"letter for minor", "GET /v HTTP/1.x\r\nHost: x\r\n\r\n", true, 400, false},
	{"lower-case, /v", "GET /v http/1.1\r\nHost: x\r\n\r\n", true, 400, false},
	{"leading zero", "GET /v HTTP/01.1\r\nHost: x\r\n\r\n", true, 400, false},
	{"huge version", "GET /v HTTP/4294967295.255\r\nHost: x\r\n\r\n", true, 400, false},
	{"space in target", "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", true, 400, false},
	{"other method, space in target", "PROPFIND /a b HTTP/1.1\r\nHost: x\r\n\r\n", true, 400, false},
	{"other method, lower-case name", "PRI * http/1.1\r\nHost: x\r\n\r\n", true, 400, false},
	{"no minor", "GET / HTTP/1\r\nHost: x\r\n\r\n", true, 400, false},
	{"two-digit major", "GET / HTTP/11.1\r\nHost: x\r\n\r\n", true, 400, false},
	{"junk after the version", "GET / HTTP/1.1x\r\nHost: x\r\n\r\n", false, 400, false},
	{"two-digit minor", "GET / HTTP/1.10\r\nHost: x\r\n\r\n", false, 400, false},
	{"bad method", "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", false, 400, false},
	{"bad field", "GET / HTTP/1.1\r\nHost: x\r\nBad Field: y\r\n\r\n", false, 400, false},
	{"HTTP/2.0", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", false, 505, false},
}

func TestParseNotHTTPVersion(t *testing.T) {
	for _, tt := range notVersionCases {
		t.Run(tt.name, func(t *testing.T) {
			var p parser
			var req Request
			_, err := p.Parse([]byte(tt.req), &req)
			require.Error(t, err)
			require.Equal(t, tt.notHTTP, errors.Is(err, errNotHTTPVersion), "error %v", err)
			require.Equal(t, tt.status, ErrorStatus(err))
			if tt.status == 400 {
				require.ErrorIs(t, err, ErrBadRequest)
			}
		})
	}
	// A version still arriving is not judged early.
	var p parser
	var req Request
	_, err := p.Parse([]byte("GET / HTT"), &req)
	require.ErrorIs(t, err, h1.ErrNeedMore)
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
						if tt.silentH2 && h2on {
							expectClosed(t, c, br)
							return
						}
						resp, _ := readResponse(t, br, "GET")
						require.Equal(t, tt.status, resp.StatusCode)
						require.True(t, resp.Close)
						expectClosed(t, c, br)
					})
				}
				// The verdict waits for the end of the line: these arrive
				// cut where the parser first sees no HTTP-version.
				for _, tt := range []struct {
					first, rest string
					status      int // 0: closed unanswered with HTTP/2 on
				}{
					{"INVALID CONNECTION P", "REFACE\r\n\r\n", 0},
					{"PROPFIND /a b", " HTTP/1.1\r\nHost: x\r\n\r\n", 400},
					{"GET /a b", " HTTP/1.1\r\nHost: x\r\n\r\n", 400},
				} {
					t.Run("split "+tt.first, func(t *testing.T) {
						c, br := rawConn(t, s)
						_, err := io.WriteString(c, tt.first)
						require.NoError(t, err)
						if tt.status != 0 || !h2on {
							// Nothing may be decided before the line ends
							// unless an answer is already due.
							want := tt.status
							if want == 0 {
								want = 400
							}
							_, err = io.WriteString(c, tt.rest)
							require.NoError(t, err)
							resp, _ := readResponse(t, br, "GET")
							require.Equal(t, want, resp.StatusCode)
							expectClosed(t, c, br)
							return
						}
						_, err = io.WriteString(c, tt.rest)
						require.NoError(t, err)
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
					return s.Stats().ProtoErrors == uint64(len(notVersionCases))+3+1
				}, 5*time.Second, 5*time.Millisecond)
			})
		}
	})
}

// TestServerPrefacePrefix: with HTTP/2 on, a first segment that is a
// proper prefix of the HTTP/2 preface ("P" of a POST written a byte at a
// time) may still be an HTTP/1 request, so the server waits for the byte
// that tells: it sends nothing meanwhile, answers the HTTP/1 request the
// bytes turn out to be, and speaks HTTP/2 only to the whole preface. A
// client cut off after "P" gets a close, no SETTINGS or GOAWAY.
func TestServerPrefacePrefix(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithNetOptions(vnet.WithLoops(1)))
		// quiet asserts that the server sends nothing while it cannot
		// tell HTTP/1 from HTTP/2 (it used to send SETTINGS at once).
		quiet := func(t *testing.T, c net.Conn) {
			require.NoError(t, c.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
			var one [1]byte
			n, err := c.Read(one[:])
			require.Zero(t, n, "the server answered %q before the request was whole", one[:n])
			require.True(t, os.IsTimeout(err), "read: %v", err)
			require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		}
		http1 := []struct {
			first, rest, method string
			status              int
			body                string
		}{
			{"P", "OST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", "POST", 200, "hi"},
			{"P", "UT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", "PUT", 200, "hi"},
			{"PRI", " /x HTTP/1.1\r\nHost: x\r\n\r\n", "PRI", 404, ""},
		}
		for _, tt := range http1 {
			t.Run(tt.first+"|"+tt.rest[:min(len(tt.rest), 8)], func(t *testing.T) {
				c, br := rawConn(t, s)
				_, err := io.WriteString(c, tt.first)
				require.NoError(t, err)
				quiet(t, c)
				_, err = io.WriteString(c, tt.rest)
				require.NoError(t, err)
				resp, body := readResponse(t, br, tt.method)
				require.Equal(t, tt.status, resp.StatusCode)
				require.Equal(t, tt.body, body)
			})
		}
		t.Run("cut after P", func(t *testing.T) {
			c, br := rawConn(t, s)
			_, err := io.WriteString(c, "P")
			require.NoError(t, err)
			quiet(t, c)
			require.NoError(t, c.(*net.TCPConn).CloseWrite())
			expectClosed(t, c, br)
		})
		t.Run("preface in two pieces", func(t *testing.T) {
			c, err := net.Dial("tcp", s.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			_, err = io.WriteString(c, h2.ClientPreface[:16]) // "PRI * HTTP/2.0\r\n"
			require.NoError(t, err)
			quiet(t, c)
			_, err = c.Write(append([]byte(h2.ClientPreface[16:]), h2.AppendSettings(nil)...))
			require.NoError(t, err)
			r := &rawH2{t: t, c: c, dead: time.Now().Add(10 * time.Second)}
			r.enc = hpack.NewEncoder(&r.eb)
			r.dec = hpack.NewDecoder(4096, nil)
			h, _, ok := r.next()
			require.True(t, ok)
			require.Equal(t, h2.TypeSettings, h.Type)
			require.NoError(t, r.write(r.get(1, "/")))
			require.Equal(t, 200, r.status(1))
		})
		require.Zero(t, s.Stats().ProtoErrors)
		require.EqualValues(t, 1, s.Stats().HTTP2Conns)
	})
}
