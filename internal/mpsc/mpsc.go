// Package mpsc is a lock-free multi-producer single-consumer FIFO queue.
//
// It is Dmitry Vyukov's non-intrusive MPSC node queue: producers swap the
// tail pointer and then link the previous tail to their node, so Push is
// wait-free (one atomic swap, one atomic store). The single consumer walks
// from a stub node. Between a producer's swap and its link the queue looks
// empty to Pop even though Empty already reports it non-empty; callers that
// must not miss an item (the reactor's park double-check) use Empty, which
// looks at the tail, and retry Pop.
//
// Nodes are recycled through a sync.Pool, so a steady stream of pushes does
// not allocate beyond the pushed values themselves.
package mpsc

import (
	"sync"
	"sync/atomic"
)

type node[T any] struct {
	next atomic.Pointer[node[T]]
	val  T
}

// Queue is an unbounded MPSC queue. The zero value is not usable; call New.
type Queue[T any] struct {
	// tail is written by every producer; keep it away from head, which only
	// the consumer touches, so the two do not share a cache line.
	tail atomic.Pointer[node[T]]
	_    [56]byte
	head *node[T] // consumer-owned stub; head.next is the first item
	_    [56]byte
	pool sync.Pool
	n    atomic.Int64
}

// New returns an empty queue.
func New[T any]() *Queue[T] {
	q := &Queue[T]{}
	stub := &node[T]{}
	q.head = stub
	q.tail.Store(stub)
	q.pool.New = func() any { return &node[T]{} }
	return q
}

// Push appends v. It is safe to call from any goroutine.
func (q *Queue[T]) Push(v T) {
	n := q.pool.Get().(*node[T])
	n.val = v
	n.next.Store(nil)
	q.n.Add(1)
	prev := q.tail.Swap(n)
	// From here until the store below, the consumer sees prev.next == nil:
	// the item is queued (Empty is false) but not yet reachable.
	prev.next.Store(n)
}

// Pop removes and returns the oldest reachable item. ok is false when no
// item is reachable right now. Only the single consumer may call Pop.
func (q *Queue[T]) Pop() (v T, ok bool) {
	next := q.head.next.Load()
	if next == nil {
		return v, false
	}
	old := q.head
	q.head = next
	v = next.val
	var zero T
	next.val = zero // next is the new stub: drop its reference to v
	q.n.Add(-1)
	// old is unreachable for producers: they only ever touch the tail,
	// which has moved past it, so it can be reused.
	old.next.Store(nil)
	q.pool.Put(old)
	return v, true
}

// Empty reports whether no item has been pushed that Pop has not yet
// returned, including items whose producer is between its two steps.
// It is meant for the consumer.
func (q *Queue[T]) Empty() bool {
	return q.tail.Load() == q.head
}

// Len is an approximate count of queued items, safe from any goroutine.
func (q *Queue[T]) Len() int { return int(q.n.Load()) }
