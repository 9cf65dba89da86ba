//go:build linux

package net

// readLender gives the epoll backend the buffer it reads into and lends a
// filled one to the loop when ForwardTo keeps it (Loop.chunk), so that a
// relayed chunk is sent from where read(2) put it, as on io_uring.
//
// Before, epoll read every connection into one 64 KiB buffer (bid -1),
// so ForwardTo copied each chunk into the destination's output segments.
// cmd/veloq-proxy -backend epoll, 16 KiB bodies (wrk -t1 -c64 to nginx):
// each answer went out as writev of 2,048 + 14,554 bytes, both copies
// (the head's 2 KiB segment filled up, then a new segment), and perf put
// runtime.memmove at 3.2-3.5 % and appendOut at 0.9-1.0 % of the proxy's
// CPU; the C floor (bench/floor/epoll_proxy.c) writes from its read
// buffer. Lent: writev of the 218-byte head + the 16,384 bytes in place,
// memmove 0.8 %, appendOut 0.5 % (the heads).
//
// A lent buffer is replaced by a spare one (or a new one), and comes back
// through recycle once its send completed. Chunks below epollMinLend are
// not offered (a copy of them is cheap, and 64 KiB lent for a few bytes
// held by a slow reader would be wasted), nor any once epollMaxLent are
// out, whatever the loop's own bounds (maxHeldPerConn, half of
// RecvBuffers). The loop lends a buffer per destination written in an
// iteration (the sends go out at its end), so the bound is as large as
// wrk's 64 connections: with 32 lent at most, 16 % of the answers were
// still copied. Returned buffers are all kept as spares: with only 4
// kept, the others were allocated anew (64 KiB each) every iteration and
// the requests per proxy CPU-second halved. So a loop holds at most
// epollMaxLent + 1 buffers, 65 × 64 KiB (4 MiB, as io_uring's default
// ring), and only one that has forwarded large chunks that many at once.
type readLender struct {
	bufs  [][]byte // by id
	cur   int      // the id being read into
	spare []uint16 // ids back from the loop
	out   int      // ids lent to the loop
}

const (
	epollReadSize = 64 << 10
	epollMinLend  = forwardMinZeroCopy
	epollMaxLent  = 64
)

// next makes a buffer not lent the one to read into, and returns it.
func (r *readLender) next() []byte {
	if k := len(r.spare); k > 0 {
		r.cur = int(r.spare[k-1])
		r.spare = r.spare[:k-1]
	} else {
		r.cur = len(r.bufs)
		r.bufs = append(r.bufs, make([]byte, epollReadSize))
	}
	return r.bufs[r.cur]
}

// offer returns the bid to report with n bytes just read into the current
// buffer: its id when the loop may keep it, else -1.
func (r *readLender) offer(n int) int32 {
	if n < epollMinLend || r.out >= epollMaxLent {
		return -1
	}
	return int32(r.cur)
}

// lent records that the loop kept the current buffer, and returns the
// next one to read into.
func (r *readLender) lent() []byte {
	r.out++
	return r.next()
}

// recycle takes buffer bid back from the loop, as a spare.
func (r *readLender) recycle(bid uint16) {
	r.out--
	r.spare = append(r.spare, bid)
}
