// Package executor compares veloq's work-stealing pool with plain
// goroutines and with github.com/panjf2000/ants/v2 on tiny tasks, and
// measures how long a task waits to be stolen. Benchmarks only: run
//
//	cd bench && go test -run '^$' -bench . -benchtime 5x -count 3 ./executor/
//
// Every BenchmarkTiny* runs batches of one million tasks; one b.N iteration
// is one batch, timed from the first submission until the last task has run
// (a sync.WaitGroup counts them, the same in every variant, and each task
// does nothing else). Besides ns/op, the time for the whole batch, each one
// reports:
//
//   - ns/task: the batch time divided by the number of tasks, the figure to
//     compare across variants;
//   - tasks/s: its inverse;
//   - cpu-ns/task: the process's CPU time (user+system, all threads) over
//     the batches per task. On a machine shared with other work the wall
//     time varies with what else runs; CPU time shows what a task costs.
//
// Tasks come from one goroutine outside the pool, except in
// BenchmarkTinyVeloqWorkerSpawn, where one task running on a worker spawns
// them onto its own deque (the fork-join path). Variants:
//
//   - VeloqSpawn: veloq Pool.Spawn, workers = GOMAXPROCS;
//   - VeloqWorkerSpawn: veloq Worker.Spawn from a task on the pool;
//   - GoWaitGroup: `go f()` per task;
//   - AntsSubmit/<size>: ants Pool.Submit with a pool of size goroutines,
//     GOMAXPROCS (the same number of workers as veloq; Submit then blocks
//     while all are busy) and 10000 (ants as commonly sized: a goroutine per
//     task in flight, reused);
//   - AntsInvoke/<size>: ants PoolWithFunc.Invoke, the variant ants
//     recommends for throughput (one function, an argument per call).
package executor

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/panjf2000/ants/v2"
	"github.com/veloq/veloq/executor"
)

// batch is the number of tasks per b.N iteration.
const batch = 1_000_000

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runBatches calls run b.N times; each call must submit batch tasks that
// call wg.Done and return once all have been submitted. runBatches waits
// for them and reports the per-task metrics.
func runBatches(b *testing.B, wg *sync.WaitGroup, run func()) {
	b.ReportAllocs()
	runtime.GC()
	c0 := cpuTime(b)
	b.ResetTimer()
	for range b.N {
		wg.Add(batch)
		run()
		wg.Wait()
	}
	b.StopTimer()
	cpu := cpuTime(b) - c0
	tasks := float64(b.N) * batch
	nsPerTask := float64(b.Elapsed().Nanoseconds()) / tasks
	b.ReportMetric(nsPerTask, "ns/task")
	b.ReportMetric(1e9/nsPerTask, "tasks/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/tasks, "cpu-ns/task")
}

func newPool(b *testing.B, opts ...executor.Option) *executor.Pool {
	p := executor.NewPool(opts...)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			b.Error(err)
		}
	})
	return p
}

func BenchmarkTinyVeloqSpawn(b *testing.B) {
	p := newPool(b)
	var wg sync.WaitGroup
	done := wg.Done
	runBatches(b, &wg, func() {
		for range batch {
			if err := p.Spawn(done); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkTinyVeloqWorkerSpawn(b *testing.B) {
	p := newPool(b)
	var wg sync.WaitGroup
	done := wg.Done
	runBatches(b, &wg, func() {
		submitted := make(chan struct{})
		err := p.Go(func(w *executor.Worker) {
			defer close(submitted)
			for range batch {
				if err := w.Spawn(done); err != nil {
					b.Error(err)
					return
				}
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		<-submitted
	})
}

func BenchmarkTinyGoWaitGroup(b *testing.B) {
	var wg sync.WaitGroup
	done := wg.Done
	runBatches(b, &wg, func() {
		for range batch {
			go done()
		}
	})
}

// antsSizes are the ants pool sizes compared (see the package comment).
func antsSizes() []int { return []int{runtime.GOMAXPROCS(0), 10_000} }

func BenchmarkTinyAntsSubmit(b *testing.B) {
	for _, size := range antsSizes() {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			p, err := ants.NewPool(size)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Release()
			var wg sync.WaitGroup
			done := wg.Done
			runBatches(b, &wg, func() {
				for range batch {
					if err := p.Submit(done); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

func BenchmarkTinyAntsInvoke(b *testing.B) {
	for _, size := range antsSizes() {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			// The argument is the WaitGroup: ants' workers take a nil
			// argument as the signal to exit.
			p, err := ants.NewPoolWithFunc(size, func(wg any) { wg.(*sync.WaitGroup).Done() })
			if err != nil {
				b.Fatal(err)
			}
			defer p.Release()
			var wg sync.WaitGroup
			runBatches(b, &wg, func() {
				for range batch {
					if err := p.Invoke(&wg); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkStealLatency measures how long a task pushed onto a busy
// worker's own deque waits before another worker starts it: the pushing
// task spins until then, so the task can only be stolen. steal-ns is the
// push-to-start time.
//
//   - idle: the other worker has parked before each push, so the figure
//     includes waking it (a futex wake and the OS scheduling a thread);
//   - hot: one task pushes b.N children back to back, so the thief is
//     usually still spinning from the previous steal.
//
// BenchmarkChanWake is the reference for idle: the same hand-off with a
// plain channel between two goroutines.
func BenchmarkStealLatency(b *testing.B) {
	b.Run("idle", func(b *testing.B) {
		p := newPool(b, executor.WithWorkers(2))
		var total time.Duration
		b.ResetTimer()
		for range b.N {
			waitParked(p)
			var started atomic.Bool
			var lat time.Duration
			done := make(chan struct{})
			if err := p.Go(func(w *executor.Worker) {
				defer close(done)
				t0 := time.Now()
				if err := w.Spawn(func() { lat = time.Since(t0); started.Store(true) }); err != nil {
					b.Error(err)
					return
				}
				for !started.Load() {
				}
			}); err != nil {
				b.Fatal(err)
			}
			<-done
			total += lat
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "steal-ns")
	})
	b.Run("hot", func(b *testing.B) {
		p := newPool(b, executor.WithWorkers(2))
		var total time.Duration
		done := make(chan struct{})
		b.ResetTimer()
		if err := p.Go(func(w *executor.Worker) {
			defer close(done)
			var started atomic.Int64
			mark := func() { started.Store(time.Now().UnixNano()) }
			for range b.N {
				started.Store(0)
				t0 := time.Now().UnixNano()
				if err := w.Spawn(mark); err != nil {
					b.Error(err)
					return
				}
				for started.Load() == 0 {
				}
				total += time.Duration(started.Load() - t0)
			}
		}); err != nil {
			b.Fatal(err)
		}
		<-done
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "steal-ns")
	})
}

// waitParked waits until every worker of p has parked.
func waitParked(p *executor.Pool) {
	for {
		s := p.Stats()
		if s.Parked == p.Workers() && s.Spinning == 0 {
			return
		}
		time.Sleep(20 * time.Microsecond)
	}
}

func BenchmarkChanWake(b *testing.B) {
	ch := make(chan int64)
	var started atomic.Int64
	go func() {
		for t0 := range ch {
			started.Store(max(1, time.Now().UnixNano()-t0)) // 0 means not yet
		}
	}()
	defer close(ch)
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		started.Store(0)
		time.Sleep(50 * time.Microsecond) // let the receiver block again
		ch <- time.Now().UnixNano()
		for started.Load() == 0 {
		}
		total += time.Duration(started.Load())
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "wake-ns")
}
