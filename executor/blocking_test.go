package executor

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func blockingShutdown(t testing.TB, b *BlockingPool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func TestBlockingOverloadAndRecovery(t *testing.T) {
	b := NewBlockingPool(WithMaxGoroutines(2), WithQueueSize(3))
	defer blockingShutdown(t, b)
	gate := make(chan struct{})
	var ran atomic.Int64
	var wg sync.WaitGroup
	blocker := func() { <-gate; ran.Add(1); wg.Done() }
	// 2 running + 3 queued are accepted...
	for i := range 5 {
		wg.Add(1)
		if err := b.Spawn(blocker); err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	// ...the next is shed.
	if err := b.Spawn(func() {}); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("Spawn when full = %v, want ErrOverloaded", err)
	}
	s := b.Stats()
	if s.Goroutines != 2 || s.Queued != 3 || s.Rejected != 1 {
		t.Fatalf("stats when full = %+v", s)
	}
	close(gate)
	waitGroup(t, &wg, "blocked tasks")
	if ran.Load() != 5 {
		t.Fatalf("ran %d, want 5", ran.Load())
	}
	// Recovered: accepting again.
	wg.Add(1)
	if err := b.Spawn(wg.Done); err != nil {
		t.Fatalf("Spawn after draining = %v", err)
	}
	waitGroup(t, &wg, "task after recovery")
}

func TestBlockingElastic(t *testing.T) {
	// All n tasks must be in flight at once to finish: the pool has to grow.
	const n = 20
	b := NewBlockingPool(WithMaxGoroutines(n), WithQueueSize(-1))
	defer blockingShutdown(t, b)
	var arrived sync.WaitGroup
	arrived.Add(n)
	var done sync.WaitGroup
	done.Add(n)
	for range n {
		if err := b.Spawn(func() { arrived.Done(); arrived.Wait(); done.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	waitGroup(t, &done, "tasks that need all goroutines")
	if s := b.Stats(); s.PeakGoroutines != n {
		t.Fatalf("PeakGoroutines = %d, want %d", s.PeakGoroutines, n)
	}
}

func TestBlockingIdleExit(t *testing.T) {
	b := NewBlockingPool(WithMaxGoroutines(8), WithGoroutineIdleTimeout(20*time.Millisecond))
	defer blockingShutdown(t, b)
	var wg sync.WaitGroup
	var arrived sync.WaitGroup
	arrived.Add(4)
	for range 4 {
		wg.Add(1)
		if err := b.Spawn(func() { arrived.Done(); arrived.Wait(); wg.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	waitGroup(t, &wg, "tasks")
	require.Eventually(t, func() bool { return b.Stats().Goroutines == 0 }, liveness, time.Millisecond, "idle goroutines exit")
	if s := b.Stats(); s.IdleExits != 4 || s.Idle != 0 {
		t.Fatalf("stats after idling = %+v", s)
	}
	// And the pool grows again from zero.
	wg.Add(1)
	if err := b.Spawn(wg.Done); err != nil {
		t.Fatal(err)
	}
	waitGroup(t, &wg, "task after idle exit")
}

// TestBlockingIdleRace submits right around the idle timeout, where a
// goroutine may be timing out as a submitter picks it.
func TestBlockingIdleRace(t *testing.T) {
	b := NewBlockingPool(WithMaxGoroutines(4), WithGoroutineIdleTimeout(time.Millisecond), WithQueueSize(100))
	defer blockingShutdown(t, b)
	var wg sync.WaitGroup
	n := 300
	if raceEnabled {
		n = 100
	}
	for i := range n {
		wg.Add(1)
		if err := b.Spawn(wg.Done); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i%3) * 500 * time.Microsecond)
	}
	waitGroup(t, &wg, "tasks around the idle timeout")
}

func TestBlockingShutdown(t *testing.T) {
	b := NewBlockingPool(WithMaxGoroutines(1), WithQueueSize(10))
	gate := make(chan struct{})
	var ran atomic.Int64
	for range 5 {
		if err := b.Spawn(func() { <-gate; ran.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := b.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a blocked task = %v, want DeadlineExceeded", err)
	}
	if err := b.Spawn(func() {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Spawn after Shutdown = %v, want ErrClosed", err)
	}
	close(gate)
	blockingShutdown(t, b)
	if ran.Load() != 5 {
		t.Fatalf("queued tasks ran %d, want 5", ran.Load())
	}
	if s := b.Stats(); s.Goroutines != 0 {
		t.Fatalf("goroutines after Shutdown = %d", s.Goroutines)
	}
	// Idle goroutines are told to exit too.
	b2 := NewBlockingPool()
	var wg sync.WaitGroup
	wg.Add(1)
	_ = b2.Spawn(wg.Done)
	wg.Wait()
	require.Eventually(t, func() bool { return b2.Stats().Idle == 1 }, liveness, time.Millisecond, "goroutine idle")
	blockingShutdown(t, b2)
}

func TestBlockingPanic(t *testing.T) {
	var logs syncBuffer
	b := NewBlockingPool(WithMaxGoroutines(1), WithBlockingLogger(testLogger(&logs)))
	defer blockingShutdown(t, b)
	var wg sync.WaitGroup
	wg.Add(2)
	_ = b.Spawn(func() { defer wg.Done(); panic("blocking boom") })
	_ = b.Spawn(wg.Done)
	waitGroup(t, &wg, "tasks")
	// Completed is counted after the task returns.
	require.Eventually(t, func() bool { return b.Stats().Completed == 2 }, liveness, time.Millisecond, "completed count")
	if s := b.Stats(); s.Panics != 1 {
		t.Fatalf("stats = %+v", s)
	}
	if !strings.Contains(logs.String(), "blocking boom") || !strings.Contains(logs.String(), "stack.0=\"github.com/veloq/veloq/executor.TestBlockingPanic") {
		t.Fatalf("panic not logged: %q", logs.String())
	}
	if err := b.Spawn(nil); !errors.Is(err, ErrNilTask) {
		t.Fatalf("Spawn(nil) = %v", err)
	}
}
