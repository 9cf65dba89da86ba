package net

import "time"

// Timer is a one-shot timer on a loop. Its function runs on the loop.
type Timer struct {
	when  int64 // loop clock, nanoseconds
	fn    func()
	index int // position in the heap; -1 when not scheduled
	loop  *Loop
}

// Stop prevents the timer from firing. It reports whether the timer was
// pending. Call it on the loop.
func (t *Timer) Stop() bool {
	if t == nil || t.index < 0 {
		return false
	}
	t.loop.timers.remove(t.index)
	return true
}

// Pending reports whether the timer is scheduled and has not fired.
func (t *Timer) Pending() bool { return t != nil && t.index >= 0 }

// Reset reschedules the timer to fire after d. Call it on the loop.
func (t *Timer) Reset(d time.Duration) {
	t.Stop()
	t.when = t.loop.clock() + int64(d)
	t.loop.timers.push(t)
}

// timerHeap is a binary min-heap on when, with back-indices so Stop is
// O(log n). It is owned by the loop goroutine.
type timerHeap []*Timer

// push adds t. The heap doubles as it grows (growTable): append's
// quarter steps for a large slice left old arrays of twice the final
// one's size as garbage (151 KB allocated for 48 KB of heap, with
// 4,000 idle connections each holding a timer).
func (h *timerHeap) push(t *Timer) {
	t.index = len(*h)
	*h = growTable(*h, t)
	h.up(t.index)
}

func (h *timerHeap) remove(i int) {
	s := *h
	last := len(s) - 1
	t := s[i]
	if i != last {
		s[i] = s[last]
		s[i].index = i
	}
	s[last] = nil
	*h = s[:last]
	if i != last {
		h.down(i)
		h.up(i)
	}
	t.index = -1
}

func (h timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].when <= h[i].when {
			break
		}
		h[p], h[i] = h[i], h[p]
		h[p].index, h[i].index = p, i
		i = p
	}
}

func (h timerHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].when < h[l].when {
			m = r
		}
		if h[i].when <= h[m].when {
			return
		}
		h[i], h[m] = h[m], h[i]
		h[i].index, h[m].index = i, m
		i = m
	}
}
