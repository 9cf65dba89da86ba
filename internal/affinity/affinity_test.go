//go:build linux

package affinity

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPinRestrictsThread(t *testing.T) {
	cpus, err := Allowed()
	if err != nil || len(cpus) == 0 {
		t.Fatalf("Allowed: %v %v", cpus, err)
	}
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // the thread is discarded when this goroutine exits locked
		target := cpus[len(cpus)-1]
		if err := Pin(target); err != nil {
			done <- err
			return
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			done <- err
			return
		}
		if set.Count() != 1 || !set.IsSet(target) {
			t.Errorf("after Pin(%d): %d cpus allowed", target, set.Count())
		}
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := Pin(1 << 20); err == nil {
		t.Fatal("Pin of an absurd cpu succeeded")
	}
}
