package executor

import "sync/atomic"

// dequeSize is the fixed capacity of a worker's local deque.
const dequeSize = 256

const dequeMask = dequeSize - 1

// deque is a fixed-size Chase-Lev work-stealing deque (Chase and Lev,
// "Dynamic Circular Work-Stealing Deque", SPAA 2005; the memory orderings
// follow Lê et al., "Correct and Efficient Work-Stealing for Weak Memory
// Models", PPoPP 2013 — Go's sync/atomic operations are sequentially
// consistent, which is at least as strong as every ordering they require).
//
// The indices top and bottom only ever grow; slot i lives at i&dequeMask.
// The tasks present are those with top <= i < bottom.
//
//   - The owner pushes at bottom and pops at bottom (LIFO). bottom is
//     written only by the owner. A pop first lowers bottom, then reads top:
//     if at least one task is left above top, the popped task cannot be
//     reached by any thief and is taken without a CAS; if it is the last task
//     (top == new bottom), owner and thieves race for it with a CAS on top.
//   - Thieves take from top (FIFO, the oldest task) with a CAS on top. A thief
//     reads the slot before its CAS and uses the value only if the CAS
//     succeeds: success means top never moved since the thief read it, so the
//     owner cannot have overwritten that slot (it writes slot top+dequeSize
//     only once top has moved past it).
//
// Stealing "half" is done one CAS per task. A single CAS that claims
// [top, top+n) would be unsafe here: the owner pops tasks below the last one
// without any CAS, so a thief's stale view of bottom could claim tasks the
// owner has already taken. The owner itself may claim a batch from top with
// one CAS (grabHalf), because bottom cannot move while it does so.
//
// Slots are atomic so that the race detector sees the publication through
// bottom and top, and so that a thief racing with a slot's reuse reads a
// whole value (which it then discards).
type deque struct {
	top    atomic.Int64
	_      [56]byte // keep the thieves' line apart from the owner's
	bottom atomic.Int64
	_      [56]byte
	// cleanTo is owner-only: slots of indices below it hold no task
	// reference (cleared or never written).
	cleanTo int64
	slots   [dequeSize]slot
}

type slot struct {
	fn  atomic.Value // func()
	wfn atomic.Value // func(*Worker)
}

func (s *slot) load() task {
	fn, _ := s.fn.Load().(func())
	wfn, _ := s.wfn.Load().(func(*Worker))
	return task{fn: fn, wfn: wfn}
}

// store writes t into the slot. Atomic stores are the expensive part of the
// deque (each is a locked instruction), so a field is written only when it
// changes from or to nil; loads are plain moves. A nil func stored in an any
// is a non-nil interface, so atomic.Value accepts it.
func (s *slot) store(t task) {
	if old, _ := s.fn.Load().(func()); t.fn != nil || old != nil {
		s.fn.Store(t.fn)
	}
	if old, _ := s.wfn.Load().(func(*Worker)); t.wfn != nil || old != nil {
		s.wfn.Store(t.wfn)
	}
}

// len returns an estimate of the number of tasks; exact for the owner when
// no thief is active.
func (d *deque) len() int {
	n := d.bottom.Load() - d.top.Load()
	if n < 0 {
		return 0
	}
	return int(n)
}

// push adds t at the bottom. Owner only. It reports false if the deque is
// full.
func (d *deque) push(t task) bool {
	b := d.bottom.Load()
	if b-d.top.Load() >= dequeSize {
		return false
	}
	d.slots[b&dequeMask].store(t)
	d.bottom.Store(b + 1) // publishes the slot to thieves
	return true
}

// pushBatch adds as many of ts as fit, in order, publishing them with a
// single store of bottom, and returns how many it added. Owner only.
func (d *deque) pushBatch(ts []task) int {
	b := d.bottom.Load()
	n := min(len(ts), dequeSize-int(b-d.top.Load()))
	if n <= 0 {
		return 0
	}
	for i, t := range ts[:n] {
		d.slots[(b+int64(i))&dequeMask].store(t)
	}
	d.bottom.Store(b + int64(n))
	return n
}

// pop removes the newest task. Owner only.
func (d *deque) pop() (task, bool) {
	if d.bottom.Load() <= d.top.Load() {
		// Empty, and only the owner can change that: skip the stores.
		return task{}, false
	}
	b := d.bottom.Load() - 1
	d.bottom.Store(b)
	t := d.top.Load()
	if t > b { // empty
		d.bottom.Store(b + 1)
		return task{}, false
	}
	tk := d.slots[b&dequeMask].load()
	if t < b { // not the last task: no thief can reach slot b
		return tk, true
	}
	// The last task: race the thieves for it.
	won := d.top.CompareAndSwap(t, t+1)
	d.bottom.Store(b + 1)
	return tk, won
}

// steal removes the oldest task. Any goroutine. It returns ok=false when the
// deque looked empty or another thief (or the owner) won the race.
func (d *deque) steal() (tk task, ok bool) {
	t := d.top.Load()
	b := d.bottom.Load()
	if t >= b {
		return task{}, false
	}
	tk = d.slots[t&dequeMask].load()
	if !d.top.CompareAndSwap(t, t+1) {
		return task{}, false
	}
	return tk, true
}

// grabHalf moves the older half of the tasks to dst with a single CAS on top.
// Owner only (bottom must not move meanwhile); used on overflow.
func (d *deque) grabHalf(dst []task) []task {
	start := len(dst)
	for {
		t := d.top.Load()
		b := d.bottom.Load()
		n := (b - t) / 2
		if n <= 0 {
			return dst
		}
		for i := t; i < t+n; i++ {
			dst = append(dst, d.slots[i&dequeMask].load())
		}
		if d.top.CompareAndSwap(t, t+n) {
			return dst
		}
		dst = dst[:start] // a thief moved top; try again
	}
}

// clear drops the references the slots hold to finished tasks. Owner only,
// and only while the deque is empty: then no thief can succeed in a steal
// (top == bottom and only the owner raises bottom), so a thief that reads a
// cleared slot fails its CAS and discards the value.
func (d *deque) clear() {
	b := d.bottom.Load()
	if d.cleanTo >= b || d.top.Load() < b {
		return
	}
	var zero task
	for i := max(d.cleanTo, b-dequeSize); i < b; i++ {
		d.slots[i&dequeMask].store(zero)
	}
	d.cleanTo = b
}
