package executor

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ringTask returns a task that records its id in got.
func ringTask(got *[]int, id int) task {
	return taskOf(func() { *got = append(*got, id) })
}

func TestRingFIFOFullHalfClose(t *testing.T) {
	var r injectRing
	r.init()
	var got []int
	for i := range ringSize {
		if res := r.push(ringTask(&got, i)); res != pushOK {
			t.Fatalf("push %d = %v, want pushOK", i, res)
		}
	}
	if res := r.push(ringTask(&got, -1)); res != pushFull {
		t.Fatalf("push into a full ring = %v, want pushFull", res)
	}
	if r.len() != ringSize || !r.ready() {
		t.Fatalf("full ring: len %d ready %v", r.len(), r.ready())
	}
	if r.closeIfEmpty() {
		t.Fatal("closeIfEmpty closed a full ring")
	}
	// Take one, then half of the rest (rounded up), then pop the rest.
	tk, ok := r.pop()
	if !ok {
		t.Fatal("pop from a full ring failed")
	}
	tk.fn()
	half := r.popHalf(nil, ringSize)
	if want := (ringSize - 1) - (ringSize-1)/2; len(half) != want {
		t.Fatalf("popHalf took %d, want %d", len(half), want)
	}
	for _, tk := range half {
		tk.fn()
	}
	for {
		tk, ok := r.pop()
		if !ok {
			break
		}
		tk.fn()
	}
	for i, id := range got {
		if id != i {
			t.Fatalf("task %d came out as %d: not FIFO", i, id)
		}
	}
	if len(got) != ringSize || r.len() != 0 || r.ready() {
		t.Fatalf("drained ring: took %d, len %d ready %v", len(got), r.len(), r.ready())
	}
	// The slots are reusable on the next lap.
	if res := r.push(ringTask(&got, ringSize)); res != pushOK {
		t.Fatalf("push on the second lap = %v", res)
	}
	if tk, ok := r.pop(); !ok {
		t.Fatal("pop on the second lap failed")
	} else {
		tk.fn()
	}
	if !r.closeIfEmpty() {
		t.Fatal("closeIfEmpty did not close an empty ring")
	}
	if !r.closeIfEmpty() {
		t.Fatal("closeIfEmpty on a ring already closed and empty reported false")
	}
	if res := r.push(ringTask(&got, -1)); res != pushClosed {
		t.Fatalf("push after close = %v, want pushClosed", res)
	}
	if r.pushedCount() != ringSize+1 {
		t.Fatalf("pushedCount = %d, want %d", r.pushedCount(), ringSize+1)
	}
}

// TestRingUnpublished stages a producer that has claimed a position but not
// yet written its task: consumers must neither take the slot nor see a
// task there, and the ring must not close.
func TestRingUnpublished(t *testing.T) {
	var r injectRing
	r.init()
	pos := r.tail.Load()
	if !r.tail.CompareAndSwap(pos, pos+1) { // the claim, as push makes it
		t.Fatal("claim failed")
	}
	if r.ready() {
		t.Error("ready with only an unpublished claim")
	}
	if _, ok := r.pop(); ok {
		t.Error("pop took an unpublished slot")
	}
	if got := r.popHalf(nil, ringSize); len(got) != 0 {
		t.Errorf("popHalf took %d unpublished slots", len(got))
	}
	if r.closeIfEmpty() {
		t.Error("closeIfEmpty closed a ring with a claimed slot")
	}
	if r.len() != 1 {
		t.Errorf("len = %d, want 1 (the claim counts for placement)", r.len())
	}
	var ran bool
	s := &r.slots[pos&ringMask]
	s.t = taskOf(func() { ran = true })
	s.seq.Store(pos + 1) // publication
	if !r.ready() {
		t.Fatal("not ready after publication")
	}
	tk, ok := r.pop()
	if !ok {
		t.Fatal("pop after publication failed")
	}
	tk.fn()
	if !ran {
		t.Fatal("popped the wrong task")
	}
}

// TestRingConcurrent has producers push (taking half back themselves when
// the ring is full, as Spawn's spill does), the owner pop and a thief take
// halves, all at once; every task must be taken exactly once.
func TestRingConcurrent(t *testing.T) {
	const producers = 3
	n := 300_000
	if raceEnabled {
		n = 30_000
	}
	var r injectRing
	r.init()
	counts := make([]atomic.Int32, producers*n)
	var taken atomic.Int64
	run := func(tk task) {
		tk.fn()
		taken.Add(1)
	}
	var stop atomic.Bool
	var consumers sync.WaitGroup
	consumers.Add(2)
	go func() { // the owner
		defer consumers.Done()
		for !stop.Load() {
			if tk, ok := r.pop(); ok {
				run(tk)
			} else {
				runtime.Gosched()
			}
		}
	}()
	go func() { // a thief
		defer consumers.Done()
		var buf []task
		for !stop.Load() {
			buf = r.popHalf(buf[:0], ringSize/2)
			for _, tk := range buf {
				run(tk)
			}
			if len(buf) == 0 {
				runtime.Gosched()
			}
		}
	}()
	var prod sync.WaitGroup
	for g := range producers {
		prod.Add(1)
		go func() {
			defer prod.Done()
			var buf []task
			for i := g * n; i < (g+1)*n; i++ {
				tk := taskOf(func() { counts[i].Add(1) })
				for r.push(tk) == pushFull {
					buf = r.popHalf(buf[:0], ringSize/2)
					for _, tk := range buf {
						run(tk)
					}
				}
			}
		}()
	}
	prod.Wait()
	deadline := time.Now().Add(liveness)
	for taken.Load() < int64(producers*n) && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	stop.Store(true)
	consumers.Wait()
	if got := taken.Load(); got != int64(producers*n) {
		t.Fatalf("took %d tasks, want %d", got, producers*n)
	}
	for i := range counts {
		if c := counts[i].Load(); c != 1 {
			t.Fatalf("task %d ran %d times", i, c)
		}
	}
	if r.pushedCount() != uint64(producers*n) {
		t.Fatalf("pushedCount = %d, want %d", r.pushedCount(), producers*n)
	}
}

// TestShutdownWhileSpilling shuts a pool down while producers keep its one
// worker's ring full, so that spawns spill to the injector as the worker
// drains and exits: every Spawn that returned nil must have run.
func TestShutdownWhileSpilling(t *testing.T) {
	rounds := 20
	if raceEnabled {
		rounds = 5
	}
	for range rounds {
		p := NewPool(WithWorkers(1))
		gate := make(chan struct{})
		mustNil(t, p.SpawnTo(0, func() { <-gate }))
		var accepted, ran atomic.Int64
		var prod sync.WaitGroup
		for range 3 {
			prod.Add(1)
			go func() {
				defer prod.Done()
				for {
					if err := p.Spawn(func() { ran.Add(1) }); err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("Spawn: %v", err)
						}
						return
					}
					accepted.Add(1)
				}
			}()
		}
		require.Eventually(t, func() bool {
			return p.Stats().Injector > 0
		}, liveness, time.Millisecond, "ring full and spilling")
		shut := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), liveness)
			defer cancel()
			shut <- p.Shutdown(ctx)
		}()
		close(gate)
		if err := <-shut; err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		prod.Wait()
		if accepted.Load() != ran.Load() {
			t.Fatalf("accepted %d tasks, ran %d", accepted.Load(), ran.Load())
		}
	}
}
