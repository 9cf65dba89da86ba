package net

// table is a table indexed by slot that grows a chunk at a time, so that
// growing copies nothing and leaves no old array behind. A flat slice
// that doubled left garbage as large as itself: at 5,000 connections the
// io_uring backend's records alone (48 bytes each, 8,192 after the last
// doubling) had left 390 KB of old arrays, about 80 bytes per
// connection, which stay in the process's RSS as long as the heap has
// not reached Go's collection goal (it had not while 5,000 idle clients
// connected to cmd/veloq-proxy). A lookup costs a shift and a mask more
// than a slice's; in exchange an entry never moves, so a pointer to one
// stays valid while the table grows.
type table[T any] struct {
	chunks []*[tableChunk]T
	n      int // entries appended
}

// tableChunk entries per chunk: 6 KiB of the io_uring backend's records,
// the least a loop with one connection holds.
const (
	tableChunkBits = 7
	tableChunk     = 1 << tableChunkBits
)

// len returns the number of entries.
func (t *table[T]) len() int { return t.n }

// at returns entry i, for i < len().
func (t *table[T]) at(i uint32) *T { return &t.chunks[i>>tableChunkBits][i&(tableChunk-1)] }

// get returns entry i, for i < len().
func (t *table[T]) get(i uint32) T { return t.chunks[i>>tableChunkBits][i&(tableChunk-1)] }

// add appends v and returns its index.
func (t *table[T]) add(v T) uint32 {
	if t.n == len(t.chunks)<<tableChunkBits {
		t.chunks = append(t.chunks, new([tableChunk]T))
	}
	i := uint32(t.n)
	t.chunks[i>>tableChunkBits][i&(tableChunk-1)] = v
	t.n++
	return i
}
