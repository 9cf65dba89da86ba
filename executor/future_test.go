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

// gatedPool returns a one-worker pool whose worker is blocked until the
// returned release function is called, so that submitted work stays queued.
func gatedPool(t *testing.T) (*Pool, func()) {
	t.Helper()
	p := NewPool(WithWorkers(1))
	gate := make(chan struct{})
	started := make(chan struct{})
	mustNil(t, p.SpawnTo(0, func() { close(started); <-gate }))
	<-started
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(func() { release(); shutdown(t, p) })
	return p, release
}

func TestFutureWaitTryGetDone(t *testing.T) {
	p, release := gatedPool(t)
	ctx := context.Background()
	f := Submit(ctx, p, func(context.Context) (string, error) { return "ok", nil })

	if _, ok, _ := f.TryGet(); ok {
		t.Fatal("TryGet reports a result while the task is queued")
	}
	done := f.Done() // made before completion
	select {
	case <-done:
		t.Fatal("Done closed before completion")
	default:
	}
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if _, err := f.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with expired ctx = %v, want DeadlineExceeded", err)
	}

	release()
	if v, err := f.Wait(ctx); v != "ok" || err != nil {
		t.Fatalf("Wait = %q, %v", v, err)
	}
	<-done
	if v, ok, err := f.TryGet(); !ok || v != "ok" || err != nil {
		t.Fatalf("TryGet = %q, %v, %v", v, ok, err)
	}
	// Done made after completion is already closed.
	g := Submit(ctx, p, func(context.Context) (int, error) { return 0, errors.New("bad") })
	if _, err := g.Wait(ctx); err == nil || err.Error() != "bad" {
		t.Fatalf("error result = %v", err)
	}
	select {
	case <-g.Done():
	default:
		t.Fatal("Done after completion is not closed")
	}
}

func TestFutureCancelWhileQueued(t *testing.T) {
	p, release := gatedPool(t)
	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Bool
	f := Submit(ctx, p, func(context.Context) (int, error) { ran.Store(true); return 1, nil })
	cancel()
	// Completes on cancellation, without waiting for the blocked worker.
	if _, err := f.Wait(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want Canceled", err)
	}
	release()
	// The queued task must notice and not run fn.
	g := Submit(context.Background(), p, func(context.Context) (int, error) { return 2, nil })
	if v, err := g.Wait(context.Background()); v != 2 || err != nil {
		t.Fatalf("later future = %d, %v", v, err)
	}
	if ran.Load() {
		t.Fatal("fn ran after its context was cancelled")
	}
}

func TestFutureCancelledBeforeSubmit(t *testing.T) {
	p := NewPool(WithWorkers(1))
	defer shutdown(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := Submit(ctx, p, func(context.Context) (int, error) { return 1, nil })
	if _, ok, err := f.TryGet(); !ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("TryGet = %v, %v; want immediate Canceled", ok, err)
	}
}

func TestFutureSeesCancellationWhileRunning(t *testing.T) {
	p := NewPool(WithWorkers(1))
	defer shutdown(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	f := Submit(ctx, p, func(ctx context.Context) (int, error) {
		close(started)
		<-ctx.Done()
		return 7, ctx.Err()
	})
	<-started
	cancel()
	// Once running, the result is fn's own.
	if v, err := f.Wait(context.Background()); v != 7 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %d, %v; want fn's 7, Canceled", v, err)
	}
}

func TestFutureOnLoop(t *testing.T) {
	p, release := gatedPool(t)
	l := newTestLoop(t)
	ctx := context.Background()
	f := Submit(ctx, p, func(context.Context) (int, error) { return 5, nil })

	type call struct {
		order  int
		v      int
		onLoop bool
	}
	calls := make(chan call, 3)
	for i := range 2 { // registered before completion, run in order
		f.OnLoop(l, func(v int, err error) { calls <- call{i, v, l.inLoop} })
	}
	release()
	if _, err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	f.OnLoop(l, func(v int, err error) { calls <- call{2, v, l.inLoop} }) // after completion
	for i := range 3 {
		select {
		case c := <-calls:
			if c.order != i || c.v != 5 || !c.onLoop {
				t.Fatalf("continuation %d: got %+v, want order %d, value 5, on the loop", i, c, i)
			}
		case <-time.After(liveness):
			t.Fatalf("continuation %d never ran", i)
		}
	}
}

func TestFutureOnClosedLoop(t *testing.T) {
	var logs syncBuffer
	p := NewPool(WithWorkers(1), WithLogger(testLogger(&logs)))
	defer shutdown(t, p)
	l := newTestLoop(t)
	l.close()
	f := Submit(context.Background(), p, func(context.Context) (int, error) { return 1, nil })
	_, _ = f.Wait(context.Background())
	f.OnLoop(l, func(int, error) { t.Error("continuation ran on a closed loop") })
	// The completer may still be posting, so the log line can come later.
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "continuation dropped")
	}, liveness, time.Millisecond, "dropped continuation logged")
}

// TestFutureConcurrentObservers races completion against Done, Wait,
// TryGet and OnLoop from many goroutines (meant for -race).
func TestFutureConcurrentObservers(t *testing.T) {
	p := NewPool(WithWorkers(2))
	defer shutdown(t, p)
	l := newTestLoop(t)
	ctx := context.Background()
	n := 2000
	if raceEnabled {
		n = 300
	}
	var conts sync.WaitGroup
	for i := range n {
		f := Submit(ctx, p, func(context.Context) (int, error) { return i, nil })
		var obs sync.WaitGroup
		for range 3 {
			obs.Add(1)
			go func() {
				defer obs.Done()
				conts.Add(1)
				f.OnLoop(l, func(v int, _ error) {
					if v != i {
						t.Errorf("OnLoop got %d, want %d", v, i)
					}
					conts.Done()
				})
				<-f.Done()
				if v, err := f.Wait(ctx); v != i || err != nil {
					t.Errorf("Wait = %d, %v; want %d", v, err, i)
				}
				if v, ok, _ := f.TryGet(); !ok || v != i {
					t.Errorf("TryGet = %d, %v", v, ok)
				}
			}()
		}
		obs.Wait()
	}
	waitGroup(t, &conts, "continuations")
}

func TestSubmitBlocking(t *testing.T) {
	b := NewBlockingPool(WithMaxGoroutines(1), WithQueueSize(-1))
	defer func() { _ = b.Shutdown(context.Background()) }()
	ctx := context.Background()
	gate := make(chan struct{})
	f := SubmitBlocking(ctx, b, func(context.Context) (int, error) { <-gate; return 3, nil })
	// The only goroutine is busy and there is no queue: shed.
	g := SubmitBlocking(ctx, b, func(context.Context) (int, error) { return 4, nil })
	if _, err := g.Wait(ctx); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("overloaded SubmitBlocking = %v, want ErrOverloaded", err)
	}
	close(gate)
	if v, err := f.Wait(ctx); v != 3 || err != nil {
		t.Fatalf("Wait = %d, %v", v, err)
	}
	// The future completes a moment before its goroutine is idle again.
	require.Eventually(t, func() bool { return b.Stats().Idle == 1 }, liveness, time.Millisecond, "goroutine idle")
	h := SubmitBlocking(ctx, b, func(context.Context) (int, error) { panic("blocking boom") })
	if _, err := h.Wait(ctx); !errors.Is(err, ErrPanicked) {
		t.Fatalf("panicking SubmitBlocking = %v, want ErrPanicked", err)
	}
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	k := SubmitBlocking(ctx, b, func(context.Context) (int, error) { return 5, nil })
	if _, err := k.Wait(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("SubmitBlocking after Shutdown = %v, want ErrClosed", err)
	}
}

func TestWorkerFromScope(t *testing.T) {
	p := NewPool(WithWorkers(2))
	defer shutdown(t, p)
	b := NewBlockingPool()
	defer blockingShutdown(t, b)
	ctx := context.Background()
	var kept context.Context
	f := Submit(ctx, p, func(ctx context.Context) (bool, error) {
		kept = ctx
		// A blocking function given this context must not see the worker.
		g := SubmitBlocking(ctx, b, func(ctx context.Context) (bool, error) {
			return WorkerFrom(ctx) == nil, nil
		})
		hidden, err := g.Wait(ctx)
		return WorkerFrom(ctx) != nil && hidden, err
	})
	if ok, err := f.Wait(ctx); !ok || err != nil {
		t.Fatalf("inside: worker visible and hidden from blocking = %v, %v", ok, err)
	}
	if WorkerFrom(kept) != nil {
		t.Fatal("WorkerFrom returned a worker for a context kept past its function")
	}
}
