package http

import (
	"math/rand/v2"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// parseOriginForm makes the URL url.ParseRequestURI makes of every
// target it takes, and leaves the others to it: a table of the edges,
// then random targets over an alphabet of the characters that matter.
func TestParseOriginFormMatchesNetURL(t *testing.T) {
	check := func(target string) {
		t.Helper()
		var u url.URL
		if !parseOriginForm(target, &u) {
			return
		}
		want, err := url.ParseRequestURI(target)
		require.NoError(t, err, "%q", target)
		require.Equal(t, *want, u, "%q", target)
		require.Equal(t, want.String(), u.String(), "%q", target)
		require.Equal(t, want.RequestURI(), u.RequestURI(), "%q", target)
	}
	taken := 0
	for _, target := range []string{
		"/", "/a/b.html", "/users/42/posts/7", "/a?b=c&d=e", "/a?b?c", "/a?", "/?", "//x", "///x",
		"/a%20b", "/a b", "/a#f", "/a!b", "/a*b", "/a(b)", "/a'b", "/é", "/a\x7f", "/a?b\x01",
		"/$&+,/:;=@-._~", "*", "http://x/y", "a/b", "", "/a?%zz", "/a?b c",
	} {
		var u url.URL
		if parseOriginForm(target, &u) {
			taken++
		}
		check(target)
	}
	require.Greater(t, taken, 5)
	const alphabet = "/aZ09-._~$&+,:;=@?%#! *()'\"<>[]\\^`{|}\x00\x1f\x7f\x80\xff"
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := []byte{'/'}
		for range r.IntN(12) {
			b = append(b, alphabet[r.IntN(len(alphabet))])
		}
		check(string(b))
	}
}
