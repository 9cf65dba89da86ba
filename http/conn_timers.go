package http

import (
	"container/heap"
	"time"

	vnet "github.com/veloq/veloq/net"
)

// connTimers holds a loop's connection deadlines (conn.timerAt) in a
// min-heap that one loop timer serves, where each connection had a
// vnet.Timer of its own: 48 bytes of heap per connection (the 32-byte
// Timer and the 16-byte closure binding onTimer to its conn) and two
// allocations per accept, which every idle keep-alive connection kept.
// A connection's place in the heap is conn.tpos, so stopping or moving
// its deadline is O(log n) as it was with the loop's own timer heap.
type connTimers struct {
	h     connHeap
	loop  *vnet.Loop
	timer *vnet.Timer // fires at at; made by the first arm
	at    int64       // when timer fires (loop clock); 0 while it is stopped
}

// arm makes cs's timer fire at deadline (loop clock), pending or not.
func (t *connTimers) arm(cs *conn, deadline int64) {
	cs.timerAt = deadline
	if cs.tpos == 0 {
		heap.Push(&t.h, cs)
	} else {
		heap.Fix(&t.h, int(cs.tpos-1))
	}
	if t.at == 0 || deadline < t.at {
		t.schedule(cs.c.Loop(), deadline)
	}
}

// stop takes cs's timer out, if it is pending. The loop timer stays as
// it is: firing with nothing due, it re-arms for the earliest deadline.
func (t *connTimers) stop(cs *conn) {
	if cs.tpos != 0 {
		heap.Remove(&t.h, int(cs.tpos-1))
	}
}

// schedule sets the loop timer to fire at deadline.
func (t *connTimers) schedule(l *vnet.Loop, deadline int64) {
	d := time.Duration(max(deadline-l.Clock(), 0))
	if t.timer == nil {
		t.loop = l
		t.timer = l.AfterFunc(d, t.fire)
	} else {
		t.timer.Reset(d)
	}
	t.at = deadline
}

// fire runs the timers that are due until the loop asks it to yield.
// Thousands of clients that connected together reach their head timeout
// together, and each expiry closes its connection; run in one callback,
// 1,500 of them were torn down, and closed at the next poll, ahead of
// every other client's input (TestMassHeadTimeoutLetsOthersThrough).
// Stopping when ShouldYield turns true leaves the loop timer due at once,
// and the loop then lets the poll and other connections' input run
// between batches, as it does for connections that each have a timer.
// Each timer leaves the heap first, so onTimer may arm it again or close
// its connection (stop then finds it gone).
func (t *connTimers) fire() {
	t.at = 0
	now := t.loop.Clock()
	for len(t.h) > 0 && t.h[0].timerAt <= now && !t.loop.ShouldYield() {
		heap.Pop(&t.h).(*conn).onTimer()
	}
	if len(t.h) > 0 && (t.at == 0 || t.h[0].timerAt < t.at) {
		t.schedule(t.loop, t.h[0].timerAt)
	}
}

// connHeap is container/heap's view of the deadlines: each conn's tpos
// is its index + 1 (0: not in the heap, the zero conn's value).
type connHeap []*conn

func (h connHeap) Len() int           { return len(h) }
func (h connHeap) Less(i, j int) bool { return h[i].timerAt < h[j].timerAt }
func (h connHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].tpos, h[j].tpos = int32(i+1), int32(j+1)
}

// Push appends x. The array doubles as it grows: append's quarter steps
// for a large slice would leave old arrays of several times the final
// one's size as garbage (as the loop's timer heap did).
func (h *connHeap) Push(x any) {
	cs := x.(*conn)
	s := *h
	if len(s) == cap(s) {
		grown := make(connHeap, len(s), max(2*cap(s), 64))
		copy(grown, s)
		s = grown
	}
	cs.tpos = int32(len(s) + 1)
	*h = append(s, cs)
}

func (h *connHeap) Pop() any {
	s := *h
	cs := s[len(s)-1]
	s[len(s)-1] = nil
	*h = s[:len(s)-1]
	cs.tpos = 0
	return cs
}
