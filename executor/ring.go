package executor

import "sync/atomic"

// ringSize is the capacity of a worker's injection ring.
const ringSize = 256

const ringMask = ringSize - 1

// ringClosed is set in tail once the ring's owner has exited; pushes then
// fail. Positions never come near it.
const ringClosed = uint64(1) << 63

// injectRing is the queue that Pool.Spawn places tasks on: a fixed-size,
// lock-free, multi-producer multi-consumer ring after Dmitry Vyukov's
// bounded MPMC queue. Any goroutine pushes; the owning worker pops, and
// thieves take half. It replaces a mutex-protected queue on the hottest
// path in the pool: a push is one CAS on tail and one store of the slot's
// sequence number, with no lock to wait on while a consumer holds it, and
// no buffer to grow (a full ring spills to the pool's injector instead, see
// Pool.inject).
//
// Positions only grow; slot i serves positions p with p&ringMask == i. Each
// slot's seq tells what the slot holds for the position the ring will next
// use it for:
//
//	seq == p             free for the producer of position p
//	seq == p+1           holds the task of position p, published
//	seq == p+ringSize    consumed; free for position p+ringSize
//
// A producer claims position p = tail by CAS once the slot says seq == p,
// writes the task, then stores seq = p+1 (publication). A consumer claims
// position p = head by CAS once the slot says seq == p+1, reads the task,
// clears it, then stores seq = p+ringSize (release to the next lap's
// producer). The task fields themselves are plain: every write to a slot's
// task happens before the seq store that hands the slot over, and every read
// happens after the seq load that received it, so the accesses are ordered
// by the atomics and are not races (the race detector agrees).
//
// A producer that has claimed a position but not yet published it holds up
// the positions after it: consumers take strictly in order. That is safe for
// wake-ups, because readiness is judged by the head slot's seq (ready), and
// the producer that publishes the head wakes a worker after publishing.
type injectRing struct {
	head atomic.Uint64 // next position to consume
	_    [56]byte      // consumers and producers write different lines
	tail atomic.Uint64 // next position to produce, | ringClosed
	_    [56]byte
	// headHint is head as last published by a consumer: the owner once per
	// round and when it parks (Worker.publish), a thief or spiller after
	// taking a batch. Placement reads it instead of head, which the owner
	// writes on every pop: reading that line on every Spawn would cost a
	// cross-core cache miss per candidate worker.
	headHint atomic.Uint64
	_        [56]byte
	// spilled counts tasks pushed to the injector because the ring was full
	// (their pushes are not in tail), for Stats.
	spilled atomic.Uint64
	slots   [ringSize]ringSlot
}

type ringSlot struct {
	seq atomic.Uint64
	t   task
}

func (r *injectRing) init() {
	for i := range r.slots {
		r.slots[i].seq.Store(uint64(i))
	}
}

// len returns an estimate of the number of tasks, counting claimed but
// unpublished positions.
func (r *injectRing) len() int {
	t := r.tail.Load() &^ ringClosed
	h := r.head.Load()
	if t <= h {
		return 0
	}
	return int(t - h)
}

// load is len for placement: tail against headHint, so an estimate that may
// be high by the tasks popped since the owner last published.
func (r *injectRing) load() int64 {
	t := r.tail.Load() &^ ringClosed
	h := r.headHint.Load()
	if t <= h {
		return 0
	}
	return int64(t - h)
}

// publishHead refreshes headHint.
func (r *injectRing) publishHead() { r.headHint.Store(r.head.Load()) }

// pushedCount returns the number of tasks ever placed on this ring,
// including those that spilled to the injector.
func (r *injectRing) pushedCount() uint64 {
	return r.tail.Load()&^ringClosed + r.spilled.Load()
}

// push appends t. It returns pushFull if the ring is full and pushClosed if
// the ring's owner has exited.
func (r *injectRing) push(t task) pushResult {
	for {
		pos := r.tail.Load()
		if pos&ringClosed != 0 {
			return pushClosed
		}
		s := &r.slots[pos&ringMask]
		seq := s.seq.Load()
		switch {
		case seq == pos:
			if r.tail.CompareAndSwap(pos, pos+1) {
				s.t = t
				s.seq.Store(pos + 1)
				return pushOK
			}
		case seq < pos:
			// The slot still holds the task of position pos-ringSize: full.
			return pushFull
		}
		// Another producer took pos; load tail again.
	}
}

type pushResult uint8

const (
	pushOK pushResult = iota
	pushFull
	pushClosed
)

// ready reports whether the task at the head is published, that is whether
// a pop would find a task now.
func (r *injectRing) ready() bool {
	for {
		h := r.head.Load()
		seq := r.slots[h&ringMask].seq.Load()
		switch {
		case seq == h+1:
			return true
		case seq <= h:
			return false // empty, or the head's producer has not published yet
		}
		// A consumer took h meanwhile; look at the new head.
	}
}

// pop removes the oldest task.
func (r *injectRing) pop() (task, bool) {
	for {
		h := r.head.Load()
		s := &r.slots[h&ringMask]
		seq := s.seq.Load()
		switch {
		case seq == h+1:
			if r.head.CompareAndSwap(h, h+1) {
				t := s.t
				s.t = task{}
				s.seq.Store(h + ringSize)
				return t, true
			}
		case seq <= h:
			return task{}, false
		}
	}
}

// popHalf appends half of the published tasks at the head (rounded up, at
// most max) to dst, claiming them with one CAS on head.
func (r *injectRing) popHalf(dst []task, max int) []task {
	for {
		h := r.head.Load()
		t := r.tail.Load() &^ ringClosed
		if t <= h {
			return dst
		}
		n := min(int(t-h)-int(t-h)/2, max)
		// Only a published prefix can be claimed.
		k := 0
		for ; k < n; k++ {
			if r.slots[(h+uint64(k))&ringMask].seq.Load() != h+uint64(k)+1 {
				break
			}
		}
		if k == 0 {
			if r.head.Load() == h {
				return dst // the head's producer has not published yet
			}
			continue
		}
		// A slot seen published at position p >= h can change only after
		// a consumer claims p, which moves head past h: then this CAS fails.
		if !r.head.CompareAndSwap(h, h+uint64(k)) {
			continue
		}
		for i := range uint64(k) {
			s := &r.slots[(h+i)&ringMask]
			dst = append(dst, s.t)
			s.t = task{}
			s.seq.Store(h + i + ringSize)
		}
		r.publishHead()
		return dst
	}
}

// closeIfEmpty closes the ring if it is empty (no task published or
// claimed) and reports whether it is now closed. Only the owner calls it,
// as it exits; afterwards push fails with pushClosed.
func (r *injectRing) closeIfEmpty() bool {
	for {
		t := r.tail.Load()
		if t&ringClosed != 0 {
			return true
		}
		if r.head.Load() != t {
			return false
		}
		// head == t and head never passes tail, so the ring is empty at the
		// moment the CAS succeeds.
		if r.tail.CompareAndSwap(t, t|ringClosed) {
			return true
		}
	}
}
