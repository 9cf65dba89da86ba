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

func TestListedAndTokens(t *testing.T) {
	conns := [][]byte{[]byte("keep-alive , X-Secret"), []byte("\tx-other\t")}
	require.True(t, listed(conns, []byte("x-secret")))
	require.True(t, listed(conns, []byte("X-Other")))
	require.False(t, listed(conns, []byte("X-Secre")))
	require.True(t, hasToken([]byte("deflate, Trailers"), "trailers"))
	require.False(t, hasToken([]byte("deflate;q=0.5"), "trailers"))
	require.Equal(t, "b2", string(cookie([]byte("a=1; bb=b2; b=3"), "bb")))
	require.Equal(t, "3", string(cookie([]byte("a=1; bb=b2; b=3"), "b")))
	require.Nil(t, cookie([]byte("a=1"), "b"))
}
