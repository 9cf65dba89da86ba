package executor

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// idTask returns a task that records its id in got when run.
func idTask(id int, got *[]int) task {
	return taskOf(func() { *got = append(*got, id) })
}

func TestDequeOrder(t *testing.T) {
	var d deque
	var got []int
	for i := range 5 {
		if !d.push(idTask(i, &got)) {
			t.Fatalf("push %d failed", i)
		}
	}
	// Thieves take the oldest, the owner the newest.
	tk, ok := d.steal()
	if !ok {
		t.Fatal("steal failed")
	}
	tk.fn()
	for {
		tk, ok := d.pop()
		if !ok {
			break
		}
		tk.fn()
	}
	want := []int{0, 4, 3, 2, 1}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if _, ok := d.steal(); ok {
		t.Fatal("steal from empty deque succeeded")
	}
	if _, ok := d.pop(); ok {
		t.Fatal("pop from empty deque succeeded")
	}
}

func TestDequeFullAndGrabHalf(t *testing.T) {
	var d deque
	var got []int
	for i := range dequeSize {
		if !d.push(idTask(i, &got)) {
			t.Fatalf("push %d failed before the deque was full", i)
		}
	}
	if d.push(idTask(-1, &got)) {
		t.Fatal("push into a full deque succeeded")
	}
	half := d.grabHalf(nil)
	if len(half) != dequeSize/2 || d.len() != dequeSize/2 {
		t.Fatalf("grabHalf took %d, left %d; want %d each", len(half), d.len(), dequeSize/2)
	}
	for _, tk := range half {
		tk.fn()
	}
	for i := range dequeSize / 2 {
		if got[i] != i {
			t.Fatalf("grabHalf did not take the oldest half in order: got[%d] = %d", i, got[i])
		}
	}
	// Wrap around the ring.
	for i := range dequeSize / 2 {
		if !d.push(idTask(1000+i, &got)) {
			t.Fatalf("push after grabHalf failed at %d", i)
		}
	}
	if d.len() != dequeSize {
		t.Fatalf("len = %d, want %d", d.len(), dequeSize)
	}
}

func TestDequeClear(t *testing.T) {
	var d deque
	d.push(taskOf(func() {}))
	d.clear() // not empty: must keep the task
	if tk, ok := d.pop(); !ok || tk.fn == nil {
		t.Fatal("clear dropped a queued task")
	}
	d.clear()
	for i := range d.slots {
		if tk := d.slots[i].load(); tk.valid() {
			t.Fatalf("slot %d still references a task after clear", i)
		}
	}
}

// TestDequeConcurrent has the owner push and pop while thieves steal; every
// task must be taken exactly once.
func TestDequeConcurrent(t *testing.T) {
	n := 1_000_000
	if raceEnabled {
		n = 100_000
	}
	var d deque
	counts := make([]atomic.Int32, n)
	var taken atomic.Int64
	run := func(tk task) {
		tk.fn()
		taken.Add(1)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if tk, ok := d.steal(); ok {
					run(tk)
				} else {
					runtime.Gosched()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		id := i
		for !d.push(taskOf(func() { counts[id].Add(1) })) {
			if tk, ok := d.pop(); ok {
				run(tk)
			}
		}
		if i%3 == 0 {
			if tk, ok := d.pop(); ok {
				run(tk)
			}
		}
	}
	for {
		tk, ok := d.pop()
		if !ok {
			break
		}
		run(tk)
	}
	// A thief may still be running a task it won; wait for the count, but
	// not past the liveness deadline (a lost task would hang here).
	deadline := time.Now().Add(liveness)
	for taken.Load() < int64(n) && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	if got := taken.Load(); got != int64(n) {
		t.Fatalf("took %d tasks, want %d", got, n)
	}
	for i := range counts {
		if c := counts[i].Load(); c != 1 {
			t.Fatalf("task %d ran %d times", i, c)
		}
	}
}
