package executor

import (
	"sync"
	"sync/atomic"
)

// task is one unit of work. Exactly one of fn and wfn is set: wfn is for
// tasks that want the *Worker that runs them (Pool.Go, Submit).
type task struct {
	fn  func()
	wfn func(*Worker)
}

func (t task) valid() bool { return t.fn != nil || t.wfn != nil }

// taskRing is a growable FIFO ring of tasks. It is not synchronized.
type taskRing struct {
	buf  []task // len(buf) is zero or a power of two
	head int    // index of the oldest task
	n    int    // number of tasks
}

// shrinkAbove is the capacity above which an empty ring gives its buffer
// back when its owner goes idle (lockedQueue.trim), so that a burst does not
// pin memory for ever. Rings are not shrunk while in use: a producer that
// keeps outrunning its consumer would make the buffer grow and shrink over
// and over.
const shrinkAbove = 1024

func (r *taskRing) len() int { return r.n }

func (r *taskRing) push(t task) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = t
	r.n++
}

func (r *taskRing) grow() {
	size := 2 * len(r.buf)
	if size == 0 {
		size = 16
	}
	buf := make([]task, size)
	for i := 0; i < r.n; i++ {
		buf[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
	}
	r.buf, r.head = buf, 0
}

func (r *taskRing) pop() (task, bool) {
	if r.n == 0 {
		return task{}, false
	}
	i := r.head
	t := r.buf[i]
	r.buf[i] = task{} // drop the reference for the garbage collector
	r.head = (i + 1) & (len(r.buf) - 1)
	r.n--
	return t, true
}

// lockedQueue is a mutex-protected FIFO used for the directed inboxes, the
// per-worker injection queues and the global injector. n mirrors the length
// so that emptiness checks (placement, the park double-check) take no lock.
// A closed queue refuses pushes; a worker closes its own queues, while they
// are empty, as its last act before exiting.
type lockedQueue struct {
	mu     sync.Mutex
	ring   taskRing
	closed bool
	pushed uint64 // tasks ever pushed, for Stats
	n      atomic.Int64
	big    atomic.Bool // the ring's buffer has grown past shrinkAbove
}

func (q *lockedQueue) len() int { return int(q.n.Load()) }

// push appends t and reports false if the queue is closed.
func (q *lockedQueue) push(t task) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.ring.push(t)
	q.pushed++
	q.n.Store(int64(q.ring.len()))
	q.noteSize()
	q.mu.Unlock()
	return true
}

// pushBatch appends ts. It is used for the injector, which is never closed.
func (q *lockedQueue) pushBatch(ts []task) {
	q.mu.Lock()
	for _, t := range ts {
		q.ring.push(t)
	}
	q.n.Store(int64(q.ring.len()))
	q.noteSize()
	q.mu.Unlock()
}

// popBatch appends up to max tasks, oldest first, to dst.
func (q *lockedQueue) popBatch(dst []task, max int) []task {
	if q.n.Load() == 0 {
		return dst
	}
	q.mu.Lock()
	for ; max > 0; max-- {
		t, ok := q.ring.pop()
		if !ok {
			break
		}
		dst = append(dst, t)
	}
	q.n.Store(int64(q.ring.len()))
	q.mu.Unlock()
	return dst
}

// noteSize records, with q.mu held, that the buffer has grown large.
func (q *lockedQueue) noteSize() {
	if len(q.ring.buf) > shrinkAbove && !q.big.Load() {
		q.big.Store(true)
	}
}

// trim releases a large buffer if the queue is empty. Workers call it when
// they park, so memory returns to its baseline once the load is gone.
func (q *lockedQueue) trim() {
	if !q.big.Load() || q.n.Load() != 0 {
		return
	}
	q.mu.Lock()
	if q.ring.len() == 0 {
		q.ring = taskRing{}
		q.big.Store(false)
	}
	q.mu.Unlock()
}

// pushedCount returns the number of tasks ever pushed.
func (q *lockedQueue) pushedCount() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pushed
}

// closeIfEmpty closes the queue if it is empty and reports whether it is
// now closed.
func (q *lockedQueue) closeIfEmpty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ring.len() == 0 {
		q.closed = true
	}
	return q.closed
}
