// Package backendtest runs a test once per reactor backend, so every
// behaviour test of net/ and http/ covers io_uring and epoll from one
// table. The io_uring run skips, with the reason, where the kernel or a
// seccomp filter refuses io_uring; the epoll run always runs.
package backendtest

import (
	"testing"

	"github.com/veloq/veloq/reactor"
)

// All is the table of backends the tests run over.
var All = []reactor.Backend{reactor.BackendUring, reactor.BackendEpoll}

// Run calls f in a subtest named after each backend.
func Run(t *testing.T, f func(t *testing.T, b reactor.Backend)) {
	t.Helper()
	for _, b := range All {
		t.Run(string(b), func(t *testing.T) {
			if b == reactor.BackendUring {
				if err := reactor.ProbeUring(); err != nil {
					t.Skipf("io_uring unavailable here: %v", err)
				}
			}
			f(t, b)
		})
	}
}

// Usable reports whether b can run here (for benchmarks, which skip).
func Usable(b reactor.Backend) bool {
	return b != reactor.BackendUring || reactor.ProbeUring() == nil
}
