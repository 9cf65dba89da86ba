package bufpool

// Cache is a per-reactor buffer cache. It must be used by a single goroutine
// at a time and performs no locking and no atomic operations.
//
// Each size class has a LIFO free list of at most perClass buffers, so the
// most recently used (cache-warm) buffer is handed out first. Get falls back
// to the shared [Pool] when the list is empty; Put hands the buffer to the
// shared Pool when the list is full.
type Cache struct {
	shared   *Pool
	perClass int
	maxBytes int64                // 0: no byte budget
	free     [NumClasses][][]byte // each with capacity perClass, full-length buffers
	stats    Stats
}

// NewCache returns a Cache that keeps at most perClass buffers per size
// class (perClass <= 0 keeps none) and falls back to shared. If shared is
// nil, misses allocate and overflow is left to the garbage collector.
//
// The free lists' bookkeeping, NumClasses*perClass slice headers, is
// allocated here, never later.
func NewCache(shared *Pool, perClass int) *Cache {
	c := &Cache{shared: shared, perClass: max(perClass, 0)}
	if c.perClass > 0 {
		for i := range c.free {
			c.free[i] = make([][]byte, 0, c.perClass)
		}
	}
	return c
}

// Get returns a buffer of length n whose capacity is the size of n's class.
// For n > MaxSize it returns a plain allocation of exactly n bytes. It
// panics if n is negative.
func (c *Cache) Get(n int) []byte {
	c.stats.Gets++
	cl := ClassOf(n)
	if cl < 0 {
		c.stats.Misses++
		return makeBuf(n)
	}
	if list := c.free[cl]; len(list) > 0 {
		b := list[len(list)-1]
		list[len(list)-1] = nil // do not keep the handed-out buffer alive
		c.free[cl] = list[:len(list)-1]
		c.stats.Hits++
		c.stats.Bytes -= int64(cap(b))
		return b[:n]
	}
	c.stats.Misses++
	if c.shared == nil {
		return make([]byte, n, ClassSize(cl))
	}
	return c.shared.Get(n)
}

// Put returns b for reuse. Buffers whose capacity is not exactly a class
// size are dropped; when b's free list is full, b goes to the shared Pool.
// As with [Pool.Put], b must not be [Arena] memory.
func (c *Cache) Put(b []byte) {
	c.stats.Puts++
	cl := classOfCap(cap(b))
	if cl < 0 {
		c.stats.Drops++
		return
	}
	if list := c.free[cl]; len(list) < c.perClass && (c.maxBytes == 0 || c.stats.Bytes+int64(cap(b)) <= c.maxBytes) {
		c.free[cl] = append(list, b[:cap(b)])
		c.stats.Bytes += int64(cap(b))
		return
	}
	c.stats.Drops++
	if c.shared != nil {
		c.shared.Put(b)
	}
}

// SetMaxBytes caps the bytes the cache keeps (0: no cap beyond perClass).
// Above it Put hands buffers to the shared Pool, whose sync.Pools give
// them to the garbage collector when unused: a burst of large buffers
// (many slow readers at once) is not kept for the life of the reactor.
func (c *Cache) SetMaxBytes(n int64) { c.maxBytes = max(n, 0) }

// Len reports how many buffers of class cl the cache holds.
func (c *Cache) Len(cl int) int {
	if cl < 0 || cl >= NumClasses {
		return 0
	}
	return len(c.free[cl])
}

// Stats returns the cache's own counters; the shared Pool keeps its own.
func (c *Cache) Stats() Stats { return c.stats }

// Flush moves every cached buffer to the shared Pool (or to the garbage
// collector if there is none), for example when a reactor shuts down.
func (c *Cache) Flush() {
	for cl := range c.free {
		list := c.free[cl]
		for i, b := range list {
			if c.shared != nil {
				c.shared.Put(b)
			}
			list[i] = nil
		}
		c.free[cl] = list[:0]
	}
	c.stats.Bytes = 0
}
