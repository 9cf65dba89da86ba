package http

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDeprecatedOptionNames checks that each deprecated option name sets
// exactly what the name that replaced it sets.
func TestDeprecatedOptionNames(t *testing.T) {
	tests := []struct {
		name     string
		old, new Option
		changed  func(o *serverOptions) bool
	}{
		{
			"WithIdleTimeout", WithIdleTimeout(5 * time.Second), WithNextRequestTimeout(5 * time.Second),
			func(o *serverOptions) bool { return o.idleTimeout == 5*time.Second },
		},
		{
			"WithLimits", WithLimits(Limits{MaxBodyBytes: 1000}), WithRequestLimits(Limits{MaxBodyBytes: 1000}),
			func(o *serverOptions) bool { return o.limits.MaxBodyBytes == 1000 },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a, b serverOptions
			tt.old(&a)
			tt.new(&b)
			require.True(t, tt.changed(&a), "the deprecated name did not set its field")
			require.True(t, tt.changed(&b), "the new name did not set its field")
			require.Equal(t, b.idleTimeout, a.idleTimeout)
			require.Equal(t, b.limits, a.limits)
		})
	}
}
