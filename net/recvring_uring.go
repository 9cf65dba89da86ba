//go:build linux

package net

import (
	"github.com/veloq/veloq/bufpool"
	"github.com/veloq/veloq/uring"
)

// recvRing is a provided-buffer ring that connections' receives select
// from, with the arena its buffers lie in. The backend has two (see
// uringBackend.small): whole buffers, one receive each, and, where the
// kernel can, small shared ones.
//
// A ring gets its buffers a step at a time, when a receive finds it empty
// (grow): the kernel takes them in turn, so each buffer in the ring ends up
// touched, however little arrives, and a ring given all of them at once had
// every one resident (veloq-proxy: 128 × 64 KiB, a page each, 512 KB).
type recvRing struct {
	br    *uring.BufRing
	arena *bufpool.Arena
	// base is the id of the arena's first buffer: the ids of both rings
	// are told apart by it (the kernel hands back whatever id a buffer was
	// given), so a completion, and the loop's recycle, name their ring.
	base    uint16
	step    int  // buffers added when the ring runs dry
	out     int  // buffers given to the ring so far
	starved bool // a receive found the ring empty in this batch
	// inc: the buffers are consumed incrementally (IOU_PBUF_RING_INC,
	// Linux 6.12+); bufs is then their state, by arena index.
	inc  bool
	bufs []incBuf
}

// incBuf is one buffer of an incremental ring. The receives of many
// connections fill it one after another, each taking only the bytes it
// got, so a burst of small receives touches a page or two instead of a
// page of a buffer each. It goes back to the ring when the kernel is done
// with it (a completion without CQEFBufMore) and the loop with every
// slice of it (recycle).
type incBuf struct {
	off  int32 // bytes the kernel has filled
	refs int32 // the kernel's while it may fill more, one per slice out
}

// newRecvRing maps count buffers of size bytes and registers their ring
// as group, incremental if inc; the buffers' ids start at base. step
// buffers go into the ring at once, and step more each time it runs dry.
func newRecvRing(r *uring.Ring, group, base uint16, size, count, step int, inc bool) (*recvRing, error) {
	arena, err := bufpool.NewArena(size, count)
	if err != nil {
		return nil, err
	}
	rr := &recvRing{arena: arena, base: base, step: step, inc: inc}
	if inc {
		rr.br, err = r.SetupBufRingInc(uint32(count), group)
		rr.bufs = make([]incBuf, count)
	} else {
		rr.br, err = r.SetupBufRing(uint32(count), group)
	}
	if err != nil {
		arena.Close()
		return nil, err
	}
	rr.grow(step)
	return rr, nil
}

// owns reports whether buffer id bid is one of this ring's.
func (rr *recvRing) owns(bid uint16) bool {
	return bid >= rr.base && int(bid-rr.base) < rr.arena.Count()
}

// grow gives the ring n more of the arena's buffers, as many as are left.
func (rr *recvRing) grow(n int) {
	n = min(n, rr.arena.Count()-rr.out)
	for i := range n {
		idx := rr.out + i
		if rr.inc {
			rr.bufs[idx] = incBuf{refs: 1} // the kernel's
		}
		rr.br.Add(rr.arena.Buf(idx), rr.base+uint16(idx), i)
	}
	rr.br.Advance(n)
	rr.out += n
}

// full reports whether every buffer of the arena has been given to the
// ring: running dry, it cannot grow.
func (rr *recvRing) full() bool { return rr.out == rr.arena.Count() }

// take accounts for a completion that names buffer bid and returns the
// bytes it received (nil for none), which the caller must recycle. more
// (CQEFBufMore): the kernel keeps the buffer, to fill more of it.
func (rr *recvRing) take(bid uint16, res int32, more bool) []byte {
	idx := int(bid - rr.base)
	if !rr.inc {
		if res <= 0 {
			rr.recycle(bid)
			return nil
		}
		return rr.arena.Buf(idx)[:res]
	}
	if res <= 0 {
		// The kernel moves on from a buffer only once it filled it to
		// its end, which takes bytes: it still has this one (it reports
		// none for an EOF, but a kernel whose commit of 0 bytes leaves
		// out BUF_MORE would name it), and keeps its reference.
		return nil
	}
	ib := &rr.bufs[idx]
	in := rr.arena.Buf(idx)[ib.off : ib.off+res]
	ib.off += res
	ib.refs++
	if !more {
		rr.recycle(bid) // the kernel's reference
	}
	return in
}

// recycle gives a buffer back to the ring; in an incremental ring it
// drops a reference, and the last one gives it back.
func (rr *recvRing) recycle(bid uint16) {
	idx := int(bid - rr.base)
	if rr.inc {
		ib := &rr.bufs[idx]
		if ib.refs--; ib.refs > 0 {
			return
		}
		*ib = incBuf{refs: 1}
	}
	rr.br.Recycle(rr.arena.Buf(idx), bid)
}
