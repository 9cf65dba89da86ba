//go:build !windows

package backendtest

import (
	"fmt"
	"os"
	"testing"
)

// CountFDs returns how many descriptors the process has open, from
// /proc/self/fd, so a test can check that what it opened was closed again.
// (The count includes the descriptor ReadDir itself holds while reading,
// the same on every call, so differences are exact.)
func CountFDs(t testing.TB) int {
	t.Helper()
	return countIn(t, "/proc/self/fd")
}

// CountFDsOf returns how many descriptors process pid has open (for a
// child the test started).
func CountFDsOf(t testing.TB, pid int) int {
	t.Helper()
	return countIn(t, fmt.Sprintf("/proc/%d/fd", pid))
}

func countIn(t testing.TB, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
