package net

// outQueue is a connection's pending output: a FIFO of segments, each a
// pooled buffer the connection's writes were copied into, or a receive
// buffer queued in place by ForwardTo. The backend reads it with peek and
// the loop consumes it with ack once the kernel took the bytes; nothing
// else touches it.
//
// Writes append to the last segment while it has room and otherwise open a
// new one, so pending output grows by whole segments and is never copied
// to grow: appending costs the same with 1 KiB or 100 MiB pending. The
// bytes a send in flight refers to are never moved or released either:
// appends land past them in the same array or in a later segment, and a
// segment is released only by the ack that passes its end.
type outQueue struct {
	segs  []outSeg // segs[head:] are pending, oldest first
	head  int
	bytes int // pending bytes over all segments
	held  int // segments that are receive buffers (bid >= 0)
}

// outSeg is one segment: b[off:] is still to be sent.
type outSeg struct {
	b   []byte
	off int
	bid int32 // receive buffer id when held in place, else -1
}

// Segment sizes: a segment a write is copied into gets at least minSeg
// bytes and at most maxSeg (so a large write is split, and releasing a
// sent segment returns memory promptly); the spare segment avail lends
// gets spareSeg, room for an answer built in place and a pipelined batch
// of small answers queued after it, in one segment.
//
// minSeg was 4 KiB too. Every connection with output pending holds a
// segment, and the loop's buffer cache keeps up to 64 of each class once
// a burst has used them (bufpool.Cache), so a burst of small copied
// writes (veloq-proxy's upstream requests, queued while their
// connections are made, 64 at a time) left 256 KiB of 4 KiB segments
// behind. RSS per idle client through veloq-proxy at 2,000 clients
// (tcpload -http -idle 2000, two runs): epoll 0.87-0.89 -> 0.83 KiB,
// io_uring 1.00 -> 0.92. A 2 KiB spare too saved 0.05 KiB more, but split
// BenchmarkServerFastPath/epoll/depth=16's batches in two segments: +21
// loop instructions a request (callgrind); with the spare kept at 4 KiB,
// 2,293 -> 2,297.
const (
	minSeg   = 2 << 10
	spareSeg = 4 << 10
	maxSeg   = 64 << 10
)

// len returns the pending bytes.
func (q *outQueue) len() int { return q.bytes }

// The methods that take or release memory are given the owning loop: its
// buffer cache supplies and takes back the segments, and a sent receive
// buffer goes back through it to the backend (Loop.recycleHeld). Every
// connection of a loop shares them, so the queue does not keep them.

// minAvail is the least free space avail offers at the tail; with less,
// it lends a fresh segment instead.
const minAvail = 512

// write appends p: in place when p was built in the space avail returned,
// else as a copy.
func (q *outQueue) write(l *Loop, p []byte) {
	if !q.adopt(l, p) {
		appendOut(q, l, p)
	}
}

// avail returns an empty slice whose capacity is free space at the end of
// the queue: the tail segment's spare room, or a spare segment of
// spareSeg bytes. Bytes appended to it and passed to write at once are
// queued without a copy (see adopt). The spare segment is the loop's, lent
// to whichever connection writes into it next, so an AvailableBuffer not
// followed by a Write holds no memory per connection.
func (q *outQueue) avail(l *Loop) []byte {
	if n := len(q.segs); n > q.head {
		if t := &q.segs[n-1]; t.bid < 0 && cap(t.b)-len(t.b) >= minAvail {
			return t.b[len(t.b):len(t.b)]
		}
	}
	if l.outSpare == nil {
		l.outSpare = l.cache.Get(spareSeg)
	}
	return l.outSpare[:0]
}

// adopt queues p without copying it if p starts where avail's space does
// and fits in it (an append that outgrew the space moved to a new array,
// which fails the check), and reports whether it did. Comparing element
// addresses is exact: p[0] and the free space's first byte are the same
// byte only if p lies in that array at that offset.
func (q *outQueue) adopt(l *Loop, p []byte) bool {
	if len(p) == 0 {
		return false
	}
	if n := len(q.segs); n > q.head {
		t := &q.segs[n-1]
		if k := len(t.b); t.bid < 0 && len(p) <= cap(t.b)-k && &t.b[:k+1][k] == &p[0] {
			t.b = t.b[:k+len(p)]
			q.bytes += len(p)
			return true
		}
	}
	if len(p) <= cap(l.outSpare) && &l.outSpare[:1][0] == &p[0] {
		q.push(l, outSeg{b: l.outSpare[:len(p)], bid: -1})
		l.outSpare = nil
		q.bytes += len(p)
		return true
	}
	return false
}

// reserve makes room for a message of n bytes at the end of the queue in
// one piece, when one segment can hold it: the tail if it has the room,
// else a new segment. Split across two segments, the message would take
// two send calls; the few bytes left unused at the old tail cost nothing
// once it is sent. The caller writes the n bytes at once.
func (q *outQueue) reserve(l *Loop, n int) {
	if n <= 0 || n > maxSeg {
		return
	}
	if k := len(q.segs); k > q.head {
		if t := &q.segs[k-1]; t.bid < 0 && cap(t.b)-len(t.b) >= n {
			return
		}
	}
	q.push(l, outSeg{b: l.cache.Get(max(n, minSeg))[:0], bid: -1})
}

// writeString is write for a string, without converting it.
func (q *outQueue) writeString(l *Loop, s string) { appendOut(q, l, s) }

func appendOut[T string | []byte](q *outQueue, l *Loop, p T) {
	q.bytes += len(p)
	if n := len(q.segs); n > q.head {
		t := &q.segs[n-1]
		if t.bid < 0 {
			k := copy(t.b[len(t.b):cap(t.b)], p)
			t.b = t.b[:len(t.b)+k]
			p = p[k:]
		}
	}
	for len(p) > 0 {
		b := l.cache.Get(min(max(len(p), minSeg), maxSeg))[:0]
		k := min(len(p), cap(b))
		b = append(b, p[:k]...)
		p = p[k:]
		q.push(l, outSeg{b: b, bid: -1})
	}
}

// hold appends receive buffer bid, whose bytes b are sent from where they
// are. Later writes go behind it.
func (q *outQueue) hold(l *Loop, b []byte, bid uint16) {
	q.bytes += len(b)
	q.held++
	q.push(l, outSeg{b: b, bid: int32(bid)})
}

// push appends s, taking a segment list from the loop's free ones when
// the queue has none: an empty queue gives its list back (ack, reset), so
// an idle connection holds none (48 bytes each).
func (q *outQueue) push(l *Loop, s outSeg) {
	if q.segs == nil {
		if n := len(l.segFree); n > 0 {
			q.segs = l.segFree[n-1]
			l.segFree[n-1] = nil
			l.segFree = l.segFree[:n-1]
		}
	}
	q.segs = append(q.segs, s)
}

// maxFreeSegLists bounds the segment lists a loop keeps for reuse (as
// many as its connections had output pending at once, up to this), and
// maxFreeSegList the length of one it keeps (a longer one was grown by a
// connection with much output pending, and goes).
const (
	maxFreeSegLists = 1024
	maxFreeSegList  = 4
)

// giveSegs gives the queue's segment list, empty, back to the loop.
func (q *outQueue) giveSegs(l *Loop) {
	if c := cap(q.segs); c > 0 && c <= maxFreeSegList && len(l.segFree) < maxFreeSegLists {
		l.segFree = append(l.segFree, q.segs[:0])
	}
	q.segs = nil
}

// peek returns the bytes to send next: the rest of the oldest segment
// (empty when nothing is pending). They stay valid until acked.
func (q *outQueue) peek() []byte {
	if q.head == len(q.segs) {
		return nil
	}
	s := &q.segs[q.head]
	return s.b[s.off:]
}

// segments returns the number of pending segments.
func (q *outQueue) segments() int { return len(q.segs) - q.head }

// peekv fills iov with the bytes to send next, segment by segment from
// the oldest, as many segments as iov holds, and returns how many it
// filled and their bytes. One gathered write then sends what several
// writes did: a streamed HTTP answer's head (in a small segment) and the
// body part written after it (which overflowed into the next segment)
// went out in two write(2) calls, two TCP segments through the loopback
// stack, where a C proxy makes one (strace -c of cmd/veloq-proxy -backend
// epoll, 16 KiB bodies: 3.0 writes per request, 2.0 with peekv). The
// bytes stay valid until acked.
func (q *outQueue) peekv(iov []iovec) (int, int) {
	k, n := 0, 0
	for i := q.head; i < len(q.segs) && k < len(iov); i++ {
		s := &q.segs[i]
		b := s.b[s.off:]
		if len(b) == 0 {
			continue
		}
		iov[k].Base = &b[0]
		iov[k].SetLen(len(b))
		k++
		n += len(b)
	}
	return k, n
}

// ack consumes n sent bytes from the front, releasing the segments they
// complete.
func (q *outQueue) ack(l *Loop, n int) {
	q.bytes -= n
	for n > 0 {
		s := &q.segs[q.head]
		left := len(s.b) - s.off
		if n < left {
			s.off += n
			return
		}
		n -= left
		q.release(l, s)
		q.head++
	}
	// A fully sent tail segment with room is kept for the next writes
	// only if nothing else is queued; otherwise the slice is compacted
	// when empty.
	if q.head == len(q.segs) {
		q.giveSegs(l)
		q.head = 0
	} else if q.head > 32 && q.head*2 > len(q.segs) {
		k := copy(q.segs, q.segs[q.head:])
		clear(q.segs[k:])
		q.segs = q.segs[:k]
		q.head = 0
	}
}

func (q *outQueue) release(l *Loop, s *outSeg) {
	if s.bid >= 0 {
		q.held--
		l.recycleHeld(uint16(s.bid))
	} else {
		l.cache.Put(s.b)
	}
	*s = outSeg{}
}

// reset drops everything pending. The kernel must hold none of it.
func (q *outQueue) reset(l *Loop) {
	for i := q.head; i < len(q.segs); i++ {
		q.release(l, &q.segs[i])
	}
	q.giveSegs(l)
	q.head, q.bytes = 0, 0
}
