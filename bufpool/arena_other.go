//go:build !unix

package bufpool

// mapArena allocates n zeroed bytes from the Go heap: without mmap, and
// without io_uring (the one user that needs memory the collector never
// moves), an ordinary allocation does.
func mapArena(n int) ([]byte, error) { return make([]byte, n), nil }

func unmapArena([]byte) error { return nil }
