package websocket

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDeprecatedOptionNames checks that each deprecated option name sets
// exactly what the name that replaced it sets, and that both change the
// default.
func TestDeprecatedOptionNames(t *testing.T) {
	tests := []struct {
		name     string
		old, new Option
	}{
		{"WithLimits", WithLimits(1000, 2000), WithMessageLimits(1000, 2000)},
		{"WithKeepAlive", WithKeepAlive(time.Second, 0), WithPing(time.Second, 0)},
		{"WithCloseTimeout", WithCloseTimeout(time.Second), WithCloseHandshakeTimeout(time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := defaultConfig(), defaultConfig()
			tt.old(&a)
			tt.new(&b)
			require.Equal(t, b, a)
			require.NotEqual(t, defaultConfig(), a, "the option changed nothing")
		})
	}
}
