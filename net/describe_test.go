package net

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// describedBlocker is a blocking handler that names itself.
type describedBlocker struct{ *blockingHandler }

func (describedBlocker) Describe(*Conn) string { return "the user's code" }

// A Describer's answer replaces the handler's type in the blocked-loop
// warning.
func TestBlockedLoopDescriber(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		var logs logBuffer
		h := describedBlocker{&blockingHandler{closeRecorder: &closeRecorder{closed: make(chan closeInfo, 4)}}}
		s := startServer(t, b, h, WithLoops(1), WithLogger(logs.logger()),
			WithLoopConfig(Config{BlockThreshold: 20 * time.Millisecond}))
		c := dial(t, s)
		_, err := c.Write([]byte("block"))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return strings.Contains(logs.String(), "blocked the loop") }, 10*time.Second, 5*time.Millisecond)
		assert.Contains(t, logs.String(), `callback="OnData of the user's code"`)
	})
}
