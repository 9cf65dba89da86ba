//go:build unix

package bufpool

import "golang.org/x/sys/unix"

// mapArena maps n bytes of anonymous private memory, outside the Go heap
// (MAP_ANON: the name every unix has, MAP_ANONYMOUS on Linux).
func mapArena(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
}

func unmapArena(mem []byte) error { return unix.Munmap(mem) }
