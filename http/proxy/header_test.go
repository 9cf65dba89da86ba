//go:build unix

package proxy

import (
	nethttp "net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	vnet "github.com/veloq/veloq/net"
)

// Every name classify knows, in any case, and a few it must not.
func TestClassify(t *testing.T) {
	for name, want := range map[string]fieldKind{
		"Connection": kindConn, "Keep-Alive": kindHop, "Proxy-Connection": kindHop, "TE": kindTE,
		"Transfer-Encoding": kindHop, "Upgrade": kindHop, "Content-Length": kindFramed, "Host": kindHost,
		"Expect": kindExpect, "X-Forwarded-For": kindXFF, "X-Forwarded-Proto": kindXFwd,
		"X-Forwarded-Host": kindXFwd, "Forwarded": kindForwarded,
		"Trailer": kindPass, "Content-Type": kindPass, "X-Forwarded-Port": kindPass, "Tee": kindPass,
	} {
		for _, n := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
			require.Equal(t, want, classify([]byte(n)), n)
		}
	}
}

func strs(b [][]byte) []string {
	s := make([]string, len(b))
	for i := range b {
		s[i] = string(b[i])
	}
	return s
}

func TestListedAndTokens(t *testing.T) {
	conns := appendConnTokens(nil, []byte("keep-alive , X-Secret,,Transfer-Encoding"))
	conns = appendConnTokens(conns, []byte("\tx-other\t, TE, close"))
	require.True(t, listed(conns, []byte("x-secret")))
	require.True(t, listed(conns, []byte("X-Other")))
	require.True(t, listed(conns, []byte("te")), "TE named by Connection is not forwarded")
	require.False(t, listed(conns, []byte("X-Secre")))
	// Tokens naming fields dropped anyway are not kept: nginx's
	// "Connection: keep-alive" leaves nothing to look up per field.
	require.Equal(t, []string{"X-Secret", "x-other", "TE", "close"}, strs(conns))
	require.Empty(t, appendConnTokens(nil, []byte("keep-alive")))
	require.Empty(t, appendConnTokens(nil, []byte("Keep-Alive")))
	require.Equal(t, [][]byte{[]byte("close")}, appendConnTokens(nil, []byte("close")))
	require.True(t, hasToken([]byte("deflate, Trailers"), "trailers"))
	require.False(t, hasToken([]byte("deflate;q=0.5"), "trailers"))
	require.Equal(t, "b2", string(cookie([]byte("a=1; bb=b2; b=3"), "bb")))
	require.Equal(t, "3", string(cookie([]byte("a=1; bb=b2; b=3"), "b")))
	require.Nil(t, cookie([]byte("a=1"), "b"))
}

// TestAppendIP: the text of an address is netip's, IPv4 (every octet
// value in every position) and IPv6 alike.
func TestAppendIP(t *testing.T) {
	for o := 0; o < 256; o++ {
		b := byte(o)
		for _, ip := range []netip.Addr{
			netip.AddrFrom4([4]byte{b, 0, 9, 10}), netip.AddrFrom4([4]byte{99, b, 100, 255}),
			netip.AddrFrom4([4]byte{1, 200, b, 7}), netip.AddrFrom4([4]byte{127, 0, 0, b}),
		} {
			require.Equal(t, ip.String(), string(appendIP([]byte("x"), ip)[1:]))
		}
	}
	for _, s := range []string{"::1", "2001:db8::7", "fe80::1%eth0"} {
		ip := netip.MustParseAddr(s)
		require.Equal(t, ip.String(), string(appendIP(nil, ip)))
	}
}

// A middleware in front of the proxy that puts CR or LF into a forwarded
// field, the target or Host gets 400 and the upstream never sees the
// request: the client checks what it forwards, even when the server's
// parser delivered it.
func TestInjectedFieldRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var seen atomic.Int64
		up := rawUpstream(t, func(r *nethttp.Request) ([]byte, bool) {
			seen.Add(1)
			return []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), false
		})
		p := newProxy(t, WithUpstreams(up))
		for _, inject := range []func(r *vhttp.Request){
			func(r *vhttp.Request) {
				r.Headers = append(r.Headers, vhttp.HeaderField{Name: []byte("X-From-Query"), Value: []byte("a value\r\nEvil: 1")})
			},
			func(r *vhttp.Request) {
				r.Headers = append(r.Headers, vhttp.HeaderField{Name: []byte("X-Name\r\nEvil"), Value: []byte("1")})
			},
			func(r *vhttp.Request) { r.Target = []byte("/rewritten\r\nEvil: 1") },
			func(r *vhttp.Request) { r.Host = []byte("a.example\r\nEvil: 1") },
		} {
			mw := vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
				inject(r)
				p.ServeHTTP(w, r)
			})
			addr := serve(t, b, mw)
			code, _ := get(t, httpClient(), "http://"+addr+"/x")
			require.Equal(t, vhttp.StatusBadRequest, code)
		}
		require.Zero(t, seen.Load(), "an injected request reached the upstream")
		code, body := get(t, httpClient(), "http://"+serve(t, b, p)+"/x")
		require.Equal(t, 200, code)
		require.Equal(t, "ok", body)
		require.EqualValues(t, 1, seen.Load())
	})
}
