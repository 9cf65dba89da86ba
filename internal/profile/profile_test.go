package profile

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/veloq/veloq/internal/backendtest"
)

// -memprofile: once the command is asked to stop, a heap profile
// (gzipped, as pprof writes it) is on disk before the context it waits
// on is done; a path that cannot be written is reported, and the command
// stops all the same.
func TestHeapAtStop(t *testing.T) {
	dir := backendtest.TempDir(t)
	for _, tc := range []struct {
		name, path string
		ok         bool
	}{
		{"written", filepath.Join(dir, "heap.prof"), true},
		{"unwritable", filepath.Join(dir, "no", "such", "dir", "heap.prof"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop, cancel := context.WithCancel(context.Background())
			var errs bytes.Buffer
			ctx := HeapAtStop(stop, tc.path, "cmd", &errs)
			select {
			case <-ctx.Done():
				t.Fatal("done before the stop")
			case <-time.After(10 * time.Millisecond):
			}
			cancel()
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("not done after the stop")
			}
			b, err := os.ReadFile(tc.path)
			if !tc.ok {
				if err == nil || !strings.Contains(errs.String(), "-memprofile") {
					t.Fatalf("file %v, report %q", err, errs.String())
				}
				return
			}
			if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
				t.Fatalf("profile %d bytes, %v", len(b), err)
			}
			if errs.Len() > 0 {
				t.Fatalf("reported %q", errs.String())
			}
		})
	}
}
