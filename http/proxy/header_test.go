//go:build unix

package proxy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
	require.True(t, hasToken([]byte("deflate, Trailers"), "trailers"))
	require.False(t, hasToken([]byte("deflate;q=0.5"), "trailers"))
	require.Equal(t, "b2", string(cookie([]byte("a=1; bb=b2; b=3"), "bb")))
	require.Equal(t, "3", string(cookie([]byte("a=1; bb=b2; b=3"), "b")))
	require.Nil(t, cookie([]byte("a=1"), "b"))
}
