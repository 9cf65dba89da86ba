package backendtest

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// refused is a backend that never runs here, standing in for a kernel
// that refuses io_uring.
type refused string

func (refused) Available() error { return errors.New("refused by the test") }

// TestRunRefused is run by TestRequireUring in a child process: the
// whole table is refused.
func TestRunRefused(t *testing.T) {
	if os.Getenv("BACKENDTEST_CHILD") != "1" {
		t.Skip("run by TestRequireUring")
	}
	Run(t, func(t *testing.T, b refused) { t.Fatal("ran a refused backend") })
}

// An unavailable io_uring skips, and fails when RequireUring is 1; an
// unavailable epoll only ever skips.
func TestRequireUring(t *testing.T) {
	child := func(require string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRunRefused$", "-test.v")
		cmd.Env = append(os.Environ(), "BACKENDTEST_CHILD=1", RequireUring+"="+require)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// Off Linux (the Windows build under Wine) io_uring cannot be
	// required: it only skips.
	onLinux := runtime.GOOS == "linux"
	required := "--- SKIP: TestRunRefused/uring"
	if onLinux {
		required = "--- FAIL: TestRunRefused/uring"
	}
	for _, tc := range []struct {
		require string
		fails   bool
		uring   string
	}{
		{"", false, "--- SKIP: TestRunRefused/uring"},
		{"0", false, "--- SKIP: TestRunRefused/uring"},
		{"1", onLinux, required},
	} {
		out, err := child(tc.require)
		if (err != nil) != tc.fails {
			t.Fatalf("%s=%q: exit error %v, want failure %v:\n%s", RequireUring, tc.require, err, tc.fails, out)
		}
		for _, want := range []string{tc.uring, "--- SKIP: TestRunRefused/epoll"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s=%q: output lacks %q:\n%s", RequireUring, tc.require, want, out)
			}
		}
	}
}
