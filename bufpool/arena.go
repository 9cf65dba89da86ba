package bufpool

import (
	"errors"
	"fmt"
	"math"
	"os"
)

// ErrInvalidSize is returned by [NewArena] for non-positive or overflowing
// sizes.
var ErrInvalidSize = errors.New("bufpool: invalid arena size")

// Arena is a fixed set of count equal buffers of bufSize bytes each, carved
// from one anonymous private memory mapping. The memory is not owned by the
// Go heap: the garbage collector neither moves nor frees it, which makes it
// safe to hand to the kernel (io_uring provided-buffer rings) for as long as
// the Arena is open. Outside unix (Windows) the memory is an ordinary Go
// allocation, which serves there: only io_uring, which is Linux only, hands
// arena memory to the kernel beyond a call.
//
// Buf may be called concurrently; Close must not run concurrently with any
// other method. Slices returned by Buf must not be used after Close: the
// memory is unmapped and touching it faults. For the same reason they must
// never be handed to [Pool.Put] or [Cache.Put].
type Arena struct {
	mem     []byte // the whole mapping; nil after Close
	bufSize int
	count   int
}

// NewArena maps bufSize*count bytes, rounded up to a whole number of pages.
// Buffers are laid out back to back with exactly bufSize bytes each; only
// the total is rounded, so bufSize need not be a page multiple (choose one if
// buffers should be page-aligned). The memory starts zeroed.
func NewArena(bufSize, count int) (*Arena, error) {
	if bufSize <= 0 || count <= 0 {
		return nil, fmt.Errorf("bufpool: arena of %d buffers of %d bytes: %w", count, bufSize, ErrInvalidSize)
	}
	page := os.Getpagesize()
	if count > (math.MaxInt-page)/bufSize {
		return nil, fmt.Errorf("bufpool: arena of %d buffers of %d bytes overflows: %w", count, bufSize, ErrInvalidSize)
	}
	total := (bufSize*count + page - 1) / page * page
	mem, err := mapArena(total)
	if err != nil {
		return nil, fmt.Errorf("bufpool: mmap %d bytes for arena: %w", total, err)
	}
	return &Arena{mem: mem, bufSize: bufSize, count: count}, nil
}

// Buf returns buffer i with len and cap both bufSize, so appending to it
// can never spill into buffer i+1. It panics if i is out of range or the
// arena is closed.
func (a *Arena) Buf(i int) []byte {
	if a.mem == nil {
		panic(fmt.Sprintf("bufpool: Arena.Buf(%d) called after Close", i))
	}
	if i < 0 || i >= a.count {
		panic(fmt.Sprintf("bufpool: Arena.Buf(%d) out of range [0, %d)", i, a.count))
	}
	off := i * a.bufSize
	return a.mem[off : off+a.bufSize : off+a.bufSize]
}

// Count returns the number of buffers.
func (a *Arena) Count() int { return a.count }

// BufSize returns the size of each buffer in bytes.
func (a *Arena) BufSize() int { return a.bufSize }

// Len returns the size of the mapping in bytes: BufSize*Count rounded up to
// the page size.
func (a *Arena) Len() int { return len(a.mem) }

// Close unmaps the arena. It is idempotent.
func (a *Arena) Close() error {
	if a.mem == nil {
		return nil
	}
	mem := a.mem
	a.mem = nil
	if err := unmapArena(mem); err != nil {
		return fmt.Errorf("bufpool: munmap arena: %w", err)
	}
	return nil
}
