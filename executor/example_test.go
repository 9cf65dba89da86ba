package executor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/veloq/veloq/executor"
)

func ExamplePool() {
	p := executor.NewPool(executor.WithWorkers(4))
	defer p.Shutdown(context.Background())

	var sum atomic.Int64
	var wg sync.WaitGroup
	for i := 1; i <= 100; i++ {
		wg.Add(1)
		if err := p.Spawn(func() { sum.Add(int64(i)); wg.Done() }); err != nil {
			fmt.Println(err)
			wg.Done()
		}
	}
	wg.Wait()
	fmt.Println(sum.Load())
	// Output: 5050
}

// Fork-join: a task splits its range and pushes the halves onto its own
// worker's deque, where idle workers steal them.
func ExampleWorker_Go() {
	p := executor.NewPool()
	defer p.Shutdown(context.Background())

	var sum atomic.Int64
	var wg sync.WaitGroup
	var split func(w *executor.Worker, lo, hi int)
	split = func(w *executor.Worker, lo, hi int) {
		defer wg.Done()
		if hi-lo <= 1000 {
			s := 0
			for i := lo; i < hi; i++ {
				s += i
			}
			sum.Add(int64(s))
			return
		}
		mid := (lo + hi) / 2
		wg.Add(2)
		w.Go(func(w *executor.Worker) { split(w, lo, mid) })
		w.Go(func(w *executor.Worker) { split(w, mid, hi) })
	}
	wg.Add(1)
	p.Go(func(w *executor.Worker) { split(w, 0, 1_000_000) })
	wg.Wait()
	fmt.Println(sum.Load())
	// Output: 499999500000
}

func ExampleSubmit() {
	p := executor.NewPool()
	defer p.Shutdown(context.Background())

	ctx := context.Background()
	f := executor.Submit(ctx, p, func(ctx context.Context) (string, error) {
		return "computed", nil
	})
	v, err := f.Wait(ctx)
	fmt.Println(v, err)

	bad := executor.Submit(ctx, p, func(ctx context.Context) (int, error) {
		var m map[string]int
		//lint:ignore SA5000 the example shows a bug in the function, a runtime panic, coming back as ErrPanicked
		m["x"] = 1 // panics: assignment to nil map
		return 0, nil
	})
	_, err = bad.Wait(ctx)
	fmt.Println(errors.Is(err, executor.ErrPanicked))
	// Output:
	// computed <nil>
	// true
}

// loop stands in for a reactor: one goroutine running posted functions.
type loop chan func()

func (l loop) Post(fn func()) error { l <- fn; return nil }

func ExampleFuture_OnLoop() {
	p := executor.NewPool()
	defer p.Shutdown(context.Background())

	l := make(loop, 1)
	f := executor.Submit(context.Background(), p, func(context.Context) (int, error) {
		return 6 * 7, nil
	})
	// Code pinned to a reactor never blocks on Wait: it asks for the result
	// to be delivered on its own loop.
	f.OnLoop(l, func(v int, err error) { fmt.Println("on the loop:", v, err) })
	(<-l)() // the loop's next iteration runs the continuation
	// Output: on the loop: 42 <nil>
}

func ExampleBlockingPool() {
	b := executor.NewBlockingPool(executor.WithMaxGoroutines(8), executor.WithQueueSize(16))
	defer b.Shutdown(context.Background())

	f := executor.SubmitBlocking(context.Background(), b, func(context.Context) (int, error) {
		fi, err := os.Stat(os.DevNull) // a blocking system call
		if err != nil {
			return 0, err
		}
		return int(fi.Size()), nil
	})
	size, err := f.Wait(context.Background())
	fmt.Println(size, err)

	if err := b.Spawn(func() {}); errors.Is(err, executor.ErrOverloaded) {
		fmt.Println("shed the request") // every goroutine busy and the queue full
	}
	// Output: 0 <nil>
}
