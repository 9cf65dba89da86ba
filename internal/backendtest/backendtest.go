// Package backendtest runs a test once per reactor backend, so every
// behaviour test of net/ and http/ covers io_uring and epoll from one
// table. The io_uring run skips, with the reason, where the kernel or a
// seccomp filter refuses io_uring (it fails instead when
// VELOQ_REQUIRE_URING=1); the epoll run always runs.
//
// It imports no veloq package: it is generic over the backend type (in
// practice net.Backend), whose Available method says whether the backend
// can run here. So net's own tests can use it without an import cycle,
// and test support does not sit above the package it tests.
package backendtest

import (
	"bytes"
	"os"
	"runtime"
	"sync"
	"testing"
)

// Backend is what the table needs of a backend name.
type Backend interface {
	~string
	// Available returns nil when the backend can run here, or why not.
	Available() error
}

// Names is the table of backends the tests run over, io_uring first;
// "portable" is the backend on Go's own net package.
var Names = []string{"uring", "epoll", "portable"}

// All returns the table as values of B.
func All[B Backend]() []B {
	out := make([]B, len(Names))
	for i, n := range Names {
		out[i] = B(n)
	}
	return out
}

// Run calls f in a subtest named after each backend, skipping a backend
// that cannot run here with the reason.
func Run[B Backend](t *testing.T, f func(t *testing.T, b B)) {
	t.Helper()
	for _, b := range All[B]() {
		t.Run(string(b), func(t *testing.T) {
			if err := b.Available(); err != nil {
				SkipUnavailable(t, string(b), err)
			}
			f(t, b)
		})
	}
}

// RequireUring is the environment variable that makes an unavailable
// io_uring fail a test instead of skipping it. CI sets it to 1 where
// io_uring works, so that a broken probe or ring setup cannot pass as
// "the kernel refused" with only the epoll half of the table run.
const RequireUring = "VELOQ_REQUIRE_URING"

// Required reports whether backend must run here: io_uring on Linux when
// RequireUring is 1. io_uring exists only on Linux, so elsewhere (the
// Windows build under Wine in CI, which inherits the variable) the
// requirement is moot.
func Required(backend string) bool {
	return backend == "uring" && os.Getenv(RequireUring) == "1" && runtime.GOOS == "linux"
}

// SkipUnavailable skips t because backend cannot run here, for reason
// why; it fails t instead when the backend is Required.
func SkipUnavailable(t testing.TB, backend string, why error) {
	t.Helper()
	if Required(backend) {
		t.Fatalf("%s unavailable here: %v (%s=1 requires it)", backend, why, RequireUring)
	}
	t.Skipf("%s unavailable here: %v", backend, why)
}

// Buffer collects what another goroutine writes (a server's log, a child
// process's output) for a test to read while the writer is still going.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *Buffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// String returns everything written so far.
func (w *Buffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
