package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Bad command lines fail with a clear error before anything listens.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "at least one -upstream"},
		{[]string{"-upstream", "127.0.0.1:1", "-policy", "fastest"}, "-policy"},
		{[]string{"-upstream", "127.0.0.1:1", "-policy", "hash"}, "-hash-header"},
		{[]string{"-upstream", "no-port"}, "bad upstream"},
		{[]string{"-upstream", "127.0.0.1:1", "-cert", "x.pem"}, "-cert and -key"},
		{[]string{"-upstream", "127.0.0.1:1", "-health-path", "healthz"}, "health check path"},
	} {
		err := run(tc.args)
		require.Error(t, err, "%v", tc.args)
		require.Contains(t, err.Error(), tc.want, "%v", tc.args)
	}
}
