//go:build linux

// Package affinity pins the calling OS thread to one CPU.
package affinity

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Pin restricts the calling thread to cpu. The caller must hold the thread
// with runtime.LockOSThread, or the Go scheduler may move the goroutine to
// another, unpinned thread. sched_setaffinity with pid 0 names the calling
// thread, not the whole process.
func Pin(cpu int) error {
	var set unix.CPUSet
	set.Zero()
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("affinity: pin to cpu %d: %w", cpu, err)
	}
	return nil
}

// Allowed returns the CPUs the process may run on, in ascending order.
func Allowed() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("affinity: get: %w", err)
	}
	var cpus []int
	for i := 0; i < 1024 && len(cpus) < set.Count(); i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}
