//go:build linux

// Linux only: tests the epoll backend's batching.

package net

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
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

// packetInput counts a sender once per epoch however many datagrams it
// sent, and tells senders apart by address and port.
func TestActivityPacketInput(t *testing.T) {
	var a activity
	a.enable(20*time.Microsecond, 2)
	sa := func(port uint16) []byte {
		var b [sockaddrLen]byte
		n := putSockaddr(&b, unix.AF_INET, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port))
		return b[:n]
	}
	for range 10 {
		a.packetInput(sa(40000))
	}
	require.EqualValues(t, 10, a.inputs)
	require.EqualValues(t, 1, a.seen)
	for p := range uint16(64) {
		a.packetInput(sa(40001 + p))
	}
	// 64 more senders in 1,024 marks: a few may share one (fewer counted,
	// never more); these 64 ports happen to share none.
	require.EqualValues(t, 65, a.seen)
	require.EqualValues(t, 16, a.share()) // the epoch ends: 65 senders / batchShare
}
