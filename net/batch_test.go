package net

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// share counts each connection once per epoch, however many inputs it
// sent, and offers no batch below the backend's least.
func TestActivityShare(t *testing.T) {
	for _, tc := range []struct {
		name          string
		least         uint32
		conns, inputs int // inputs per connection
		want          uint32
	}{
		{"one busy connection", 2, 1, 100, 0},
		{"seven connections", 2, 7, 3, 0},
		{"eight connections", 2, 8, 1, 2},
		{"sixty-four connections", 2, 64, 2, 16},
		{"epoll: 31 connections", epollLeastBatch, 31, 5, 0},
		{"epoll: 32 connections", epollLeastBatch, 32, 1, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a activity
			a.enable(20*time.Microsecond, tc.least)
			epochs := make([]uint8, tc.conns)
			for range tc.inputs {
				for i := range epochs {
					a.input(&epochs[i])
				}
			}
			require.Equal(t, uint32(tc.conns*tc.inputs), a.inputs)
			// The first call ends the first epoch (it ends at start), so
			// what it offers is sized by the inputs above.
			require.Equal(t, tc.want, a.share())
		})
	}
}
