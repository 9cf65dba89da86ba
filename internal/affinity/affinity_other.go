//go:build !linux

package affinity

import "runtime"

// Pin does nothing outside Linux: macOS has no call that binds a thread to
// a CPU, and the portable backend these systems run on waits in the Go
// runtime's poller, where a pinned loop thread would gain nothing. A
// pinning Server therefore starts its loops unpinned there.
func Pin(int) error { return nil }

// Allowed returns every CPU the Go runtime counts: outside Linux there is
// no affinity mask to read.
func Allowed() ([]int, error) {
	cpus := make([]int, runtime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return cpus, nil
}
