// Package bufpool provides the byte buffers of a veloq reactor.
//
// Buffers come in 12 power-of-two size classes from [MinSize] (512 B) to
// [MaxSize] (1 MiB). A request for n bytes is served from the smallest class
// that holds n, so a buffer's capacity always identifies its class; larger
// requests are plain allocations that are never pooled.
//
// There are two levels of pooling:
//
//   - [Pool] is shared and safe for concurrent use. It keeps one [sync.Pool]
//     per class, so idle memory is returned to the runtime across garbage
//     collections and heap use falls back to its baseline after load.
//   - [Cache] belongs to exactly one goroutine (a reactor) and uses no locks
//     or atomic operations. It keeps a bounded LIFO free list per class and
//     falls back to a shared Pool when a list is empty (underflow) or full
//     (overflow).
//
// Both reuse memory without clearing it: a buffer returned by Get may hold
// bytes from its previous use beyond what the caller writes. Put transfers
// ownership: the caller must not touch the buffer, or any slice aliasing
// it, afterwards.
//
// [Arena] is memory the kernel writes into, such as the buffers of an
// io_uring provided-buffer ring. It is one anonymous mmap outside the Go
// heap, so the garbage collector never moves or frees it while the kernel
// holds its address.
//
// [GetOutput] and [PutOutput] hand out [bytebufferpool.ByteBuffer] values for
// assembling responses whose size is not known in advance.
package bufpool
