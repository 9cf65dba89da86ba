//go:build linux

package backendtest

import (
	"os"
	"testing"
)

// CountFDs returns how many descriptors the process has open, from
// /proc/self/fd, so a test can check that what it opened was closed again.
// (The count includes the descriptor ReadDir itself holds while reading,
// the same on every call, so differences are exact.)
func CountFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
