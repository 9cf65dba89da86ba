package net

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDeprecatedOptionNames checks that each deprecated option name sets
// exactly what the name that replaced it sets, so code written with the
// old names keeps its meaning.
func TestDeprecatedOptionNames(t *testing.T) {
	tests := []struct {
		name     string
		old, new Option
	}{
		{"WithIdleTimeout", WithIdleTimeout(3 * time.Second), WithConnIdleTimeout(3 * time.Second)},
		{"WithBudget", WithBudget(7), WithCompletionBudget(7)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := defaultOptions(), defaultOptions()
			tt.old(&a)
			tt.new(&b)
			require.Equal(t, b.cfg, a.cfg)
			require.NotEqual(t, defaultOptions().cfg, a.cfg, "the option changed nothing")
		})
	}
}
