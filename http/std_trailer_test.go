package http

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2/hpack"

	"github.com/veloq/veloq/http/internal/h2"
	vnet "github.com/veloq/veloq/net"
)

// reportTrailer answers with what a handler sees of the request's
// trailers: the Trailer field, r.Trailer before and after the body.
var reportTrailer = nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
	before := trailerString(r.Trailer)
	body, err := io.ReadAll(r.Body)
	fmt.Fprintf(w, "Trailer field %q\nbefore %s\nbody %q %v\nafter %s\n",
		r.Header["Trailer"], before, body, err, trailerString(r.Trailer))
})

// trailerString shows h with its keys sorted, a nil h apart.
func trailerString(h nethttp.Header) string {
	if h == nil {
		return "nil"
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(h)) {
		fmt.Fprintf(&b, "%s=%q ", k, h[k])
	}
	return b.String()
}

// A trailerCase is a request with a body "hello" and trailers.
type trailerCase struct {
	name     string
	announce []string    // the Trailer fields of the head
	trailer  [][2]string // the fields after the body
	length   bool        // the body has a Content-Length (no trailers on HTTP/1)
}

var trailerCases = []trailerCase{
	{name: "none"},
	{name: "announced", announce: []string{"X-Sum"}, trailer: [][2]string{{"X-Sum", "5"}}},
	{name: "one of two sent", announce: []string{"x-sum , X-Other"}, trailer: [][2]string{{"X-Sum", "5"}}},
	{name: "two fields", announce: []string{"X-A", "X-B"}, trailer: [][2]string{{"X-B", "2"}, {"X-A", "1"}}},
	{name: "repeated", announce: []string{"X-Sum"}, trailer: [][2]string{{"X-Sum", "1"}, {"X-Sum", "2"}}},
	{name: "not announced", trailer: [][2]string{{"X-Late", "yes"}}},
	{name: "some not announced", announce: []string{"X-Sum"}, trailer: [][2]string{{"X-Sum", "5"}, {"X-Late", "yes"}}},
	{name: "announced not sent", announce: []string{"X-Sum"}},
	{name: "framing field announced", announce: []string{"Content-Length, X-Sum"}, trailer: [][2]string{{"X-Sum", "5"}}},
	{name: "length", announce: []string{"X-Sum"}, trailer: [][2]string{{"X-Sum", "5"}}, length: true},
}

// h1TrailerRequest sends tc over HTTP/1.1 to addr and returns the
// answer's status and body.
func h1TrailerRequest(t *testing.T, addr string, tc trailerCase) (int, string) {
	var b strings.Builder
	b.WriteString("POST / HTTP/1.1\r\nHost: x\r\n")
	for _, v := range tc.announce {
		b.WriteString("Trailer: " + v + "\r\n")
	}
	if tc.length {
		b.WriteString("Content-Length: 5\r\n\r\nhello")
	} else {
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n")
		for _, f := range tc.trailer {
			b.WriteString(f[0] + ": " + f[1] + "\r\n")
		}
		b.WriteString("\r\n")
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = io.WriteString(c, b.String())
	require.NoError(t, err)
	resp, err := nethttp.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// h2TrailerRequest sends tc over h2c (prior knowledge) to addr and
// returns the answer's status and body.
func h2TrailerRequest(t *testing.T, addr string, tc trailerCase) (int, string) {
	r := dialH2(t, addr)
	var head []string
	for _, v := range tc.announce {
		head = append(head, "trailer", v)
	}
	if tc.length {
		head = append(head, "content-length", "5")
	}
	require.NoError(t, r.write(h2.AppendHeaders(nil, 1, false, r.block("POST", "/", head...), h2.MinMaxFrameSize)))
	require.NoError(t, r.write(h2.AppendData(nil, 1, len(tc.trailer) == 0, []byte("hello"))))
	if len(tc.trailer) > 0 {
		r.eb.Reset()
		for _, f := range tc.trailer {
			require.NoError(t, r.enc.WriteField(hpack.HeaderField{Name: strings.ToLower(f[0]), Value: f[1]}))
		}
		require.NoError(t, r.write(h2.AppendHeaders(nil, 1, true, bytes.Clone(r.eb.Bytes()), h2.MinMaxFrameSize)))
	}
	status := r.status(1)
	var body []byte
	for {
		h, p, ok := r.next()
		require.True(t, ok, "connection closed before the answer's end")
		if h.Stream != 1 {
			continue
		}
		require.NotEqual(t, h2.TypeRSTStream, h.Type, "stream reset")
		if h.Type == h2.TypeData {
			data, err := h2.ParseData(h, p)
			require.NoError(t, err)
			body = append(body, data...)
		}
		if (h.Type == h2.TypeData || h.Type == h2.TypeHeaders) && h.Flags.Has(h2.FlagEndStream) {
			return status, string(body)
		}
	}
}

// A FromStd handler sees a request's trailers as under net/http's own
// server, over HTTP/1.1 (chunked) and HTTP/2: r.Trailer holds the names
// the Trailer field announced, without values until the body was read to
// its end, and the values then; the Trailer field leaves the header.
// Each case is sent to both servers and the handler's view compared.
func TestFromStdRequestTrailers(t *testing.T) {
	std := httptest.NewUnstartedServer(reportTrailer)
	std.Config.Protocols = new(nethttp.Protocols)
	std.Config.Protocols.SetHTTP1(true)
	std.Config.Protocols.SetUnencryptedHTTP2(true)
	std.Start()
	defer std.Close()
	stdAddr := std.Listener.Addr().String()
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, FromStd(reportTrailer))
		addr := s.Addr().String()
		for _, tc := range trailerCases {
			t.Run("h1/"+tc.name, func(t *testing.T) {
				wantStatus, want := h1TrailerRequest(t, stdAddr, tc)
				status, got := h1TrailerRequest(t, addr, tc)
				require.Equal(t, wantStatus, status)
				if status == StatusOK {
					require.Equal(t, want, got)
				}
			})
			t.Run("h2/"+tc.name, func(t *testing.T) {
				wantStatus, want := h2TrailerRequest(t, stdAddr, tc)
				status, got := h2TrailerRequest(t, addr, tc)
				require.Equal(t, wantStatus, status)
				require.Equal(t, want, got)
			})
		}
	})
}
