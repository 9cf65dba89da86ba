package bufpool

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Stats counts buffer traffic at one level ([Pool] or [Cache]).
type Stats struct {
	Gets   uint64 // calls to Get
	Puts   uint64 // calls to Put
	Hits   uint64 // Gets served from this level's free lists
	Misses uint64 // Gets not served here: allocated (Pool) or forwarded to the shared Pool (Cache)
	Drops  uint64 // Puts not kept here: foreign or oversize buffers, and (Cache) overflow forwarded to the shared Pool
	Bytes  int64  // bytes currently held in this level's free lists (see Pool.Stats)
}

// Pool is a goroutine-safe, size-classed buffer pool backed by one
// [sync.Pool] per class. The zero value is not usable; use [NewPool].
//
// Because each sync.Pool caches per P, Get and Put scale with the number of
// cores and allocate nothing in steady state. Statistics are kept in
// counters sharded by goroutine, so that reactors on different cores do
// not fight over one cache line on every operation.
type Pool struct {
	classes [NumClasses]sync.Pool // each holds unsafe.Pointer to a buffer's first byte
	shards  [numShards]statShard
}

const numShards = 16 // power of two

// statShard is one set of counters. Each Get or Put updates exactly one.
type statShard struct {
	hits, misses, puts [NumClasses]atomic.Uint64
	bigGets, drops     atomic.Uint64 // Gets above MaxSize; Puts not kept
	_                  [64]byte      // keep the next shard off our last cache line
}

// shard picks the counters for the calling goroutine by hashing the address
// of a stack variable. Goroutine stacks are disjoint, so concurrent callers
// usually land on different shards; a collision or a stack move only costs
// contention, never correctness, since every counter is atomic.
func (p *Pool) shard() *statShard {
	var marker byte
	// Sound: the pointer is turned into a plain number and never converted
	// back, so it neither keeps nor references memory; marker stays on the
	// stack because a uintptr does not make it escape.
	addr := uint64(uintptr(unsafe.Pointer(&marker)))
	// Stacks are at least 2 KiB apart; drop the low bits, then mix.
	h := (addr >> 11) * 0x9e3779b97f4a7c15
	return &p.shards[h>>60&(numShards-1)]
}

// NewPool returns an empty Pool.
func NewPool() *Pool { return new(Pool) }

// Get returns a buffer of length n whose capacity is the size of n's class.
// For n > MaxSize it returns a plain allocation of exactly n bytes, which
// Put will not keep. It panics if n is negative.
func (p *Pool) Get(n int) []byte {
	c := ClassOf(n)
	if c < 0 {
		p.shard().bigGets.Add(1)
		return makeBuf(n)
	}
	size := ClassSize(c)
	if v := p.classes[c].Get(); v != nil {
		p.shard().hits[c].Add(1)
		// Sound: Put stores only pointers to the first element of slices
		// whose capacity is exactly size, so size bytes starting at ptr lie
		// within one live allocation, and the pointer held in the
		// interface kept that allocation reachable while pooled.
		ptr := v.(unsafe.Pointer)
		return unsafe.Slice((*byte)(ptr), size)[:n]
	}
	p.shard().misses[c].Add(1)
	return make([]byte, n, size)
}

// Put returns b to the pool for reuse by a later Get. Buffers whose
// capacity is not exactly a class size (foreign, resliced from the front,
// or larger than MaxSize) are left to the garbage collector.
//
// Put cannot tell where memory came from: never Put a slice of an [Arena]
// (its capacity may well be a class size), or a sub-slice of a buffer still
// in use.
func (p *Pool) Put(b []byte) {
	c := classOfCap(cap(b))
	if c < 0 {
		p.shard().drops.Add(1)
		return
	}
	p.shard().puts[c].Add(1)
	// Storing the bare data pointer rather than a *[]byte avoids boxing a
	// slice header (an allocation per Put). unsafe.Pointer is pointer-
	// shaped, so converting it to an interface does not allocate, and the
	// garbage collector still sees it and keeps the buffer alive. The
	// capacity is recovered from the class index in Get.
	p.classes[c].Put(unsafe.Pointer(unsafe.SliceData(b)))
}

// Stats returns a snapshot of the pool's counters. They are read one by
// one, so under concurrent use the snapshot need not be exactly consistent.
//
// Bytes counts buffers Put and not yet taken back by Get. It is an upper
// bound: sync.Pool may release idle buffers at a garbage collection without
// telling the Pool, and those bytes remain counted.
func (p *Pool) Stats() Stats {
	var s Stats
	var hits, puts [NumClasses]uint64
	// All hits before any puts: a hit is counted after its buffer's Put, so
	// this order never sees more hits than puts in a class.
	for i := range p.shards {
		sh := &p.shards[i]
		for c := range NumClasses {
			hits[c] += sh.hits[c].Load()
			s.Misses += sh.misses[c].Load()
		}
		s.Misses += sh.bigGets.Load()
	}
	for i := range p.shards {
		sh := &p.shards[i]
		for c := range NumClasses {
			puts[c] += sh.puts[c].Load()
		}
		s.Drops += sh.drops.Load()
	}
	for c := range NumClasses {
		s.Hits += hits[c]
		s.Puts += puts[c]
		s.Bytes += int64(puts[c]-hits[c]) * int64(ClassSize(c))
	}
	s.Gets = s.Hits + s.Misses
	s.Puts += s.Drops
	return s
}

// makeBuf allocates an unpooled buffer, with a clearer panic than make's
// for negative sizes.
func makeBuf(n int) []byte {
	if n < 0 {
		panic(fmt.Sprintf("bufpool: negative buffer size %d", n))
	}
	return make([]byte, n)
}
