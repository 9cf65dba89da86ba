package backendtest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Wine reports whether the tests run under Wine, where the Windows build
// is tested on Linux (.ci/wine). Wine 8 differs from Windows in a few
// ways the tests meet, each skipped by name with SkipUnderWine:
//   - a peer's reset that arrived before the read reads as EOF, where
//     Windows reports WSAECONNRESET (Wine reports it only to a read
//     already waiting);
//   - it has no AF_UNIX sockets (Windows has them since 10 1803);
//   - Go's os.RemoveAll fails there (see TempDir).
func Wine() bool { return wine }

// SkipUnderWine skips t under Wine, saying why the behaviour it tests
// cannot be seen there.
func SkipUnderWine(t testing.TB, why string) {
	t.Helper()
	if wine {
		t.Skip("Wine differs from Windows here: " + why)
	}
}

// TempDir is t.TempDir, except under Wine, whose NtSetInformationFile
// lacks the disposition class that Go's os.RemoveAll uses on Windows, so
// the testing package's cleanup fails every test that made a directory.
// There it makes the directory itself and removes it file by file with
// os.Remove, which works.
func TempDir(t testing.TB) string {
	t.Helper()
	if !wine {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("", "veloq-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(t, dir) })
	return dir
}

// removeTree removes dir, deepest paths first.
func removeTree(t testing.TB, dir string) {
	var paths []string
	_ = filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err == nil {
			paths = append(paths, p)
		}
		return nil
	})
	slices.Reverse(paths)
	for _, p := range paths {
		if err := os.Remove(p); err != nil {
			t.Logf("removing the test directory: %v", err)
		}
	}
}
