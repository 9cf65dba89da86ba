//go:build linux

package net

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The epoll backend's read buffers: small reads are never lent, at most
// epollMaxLent are out at once, and returned ones are read into again, so
// a loop holds at most epollMaxLent + 1 of them however long it forwards.
func TestReadLenderBounds(t *testing.T) {
	var r readLender
	buf := r.next()
	require.Equal(t, int32(-1), r.offer(epollMinLend-1), "a small read is copied, not lent")
	var ids []uint16
	for range 3 * epollMaxLent {
		bid := r.offer(len(buf))
		if bid < 0 {
			require.Equal(t, epollMaxLent, r.out, "refused before the bound")
			break
		}
		require.Equal(t, &r.bufs[bid][0], &buf[0], "the bid names the buffer read into")
		ids = append(ids, uint16(bid))
		buf = r.lent()
		require.NotEqual(t, bid, int32(r.cur), "a lent buffer is not read into again")
	}
	require.Len(t, ids, epollMaxLent)
	require.Equal(t, int32(-1), r.offer(len(buf)))
	for _, id := range ids {
		r.recycle(id)
	}
	for range 10 * epollMaxLent {
		bid := r.offer(len(buf))
		require.GreaterOrEqual(t, bid, int32(0))
		buf = r.lent()
		r.recycle(uint16(bid))
	}
	require.Zero(t, r.out)
	require.Len(t, r.bufs, epollMaxLent+1, "returned buffers are reused, not allocated anew")
}
