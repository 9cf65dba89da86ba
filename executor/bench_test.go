package executor

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The Spawn benchmarks measure spawn plus execution of an empty task,
// amortised: b.N tasks are spawned and the clock stops when the last one
// has run. BenchmarkGoWaitGroup is the same with a goroutine per task.

func BenchmarkSpawn(b *testing.B) {
	p := NewPool()
	defer shutdown(b, p)
	benchSpawnAll(b, func(_ int, done func()) error { return p.Spawn(done) })
}

func BenchmarkGoWaitGroup(b *testing.B) {
	benchSpawnAll(b, func(_ int, done func()) error { go done(); return nil })
}

// benchSpawnAll runs b.N empty tasks through spawn (i is the task's index)
// and stops the clock when the last one has run. Every task is the same
// func value, so the benchmark allocates nothing per task.
func benchSpawnAll(b *testing.B, spawn func(i int, done func()) error) {
	var wg sync.WaitGroup
	done := wg.Done
	b.ReportAllocs()
	b.ResetTimer()
	wg.Add(b.N)
	for i := range b.N {
		if err := spawn(i, done); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
}

func BenchmarkSpawnParallel(b *testing.B) {
	p := NewPool()
	defer shutdown(b, p)
	var wg sync.WaitGroup
	done := wg.Done
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			wg.Add(1)
			if err := p.Spawn(done); err != nil {
				b.Error(err)
				wg.Done()
			}
		}
	})
	wg.Wait()
}

func BenchmarkGoWaitGroupParallel(b *testing.B) {
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			wg.Add(1)
			go func() { wg.Done() }()
		}
	})
	wg.Wait()
}

// BenchmarkWorkerSpawn spawns from inside a worker onto its own deque.
func BenchmarkWorkerSpawn(b *testing.B) {
	p := NewPool()
	defer shutdown(b, p)
	var wg sync.WaitGroup
	done := wg.Done
	b.ReportAllocs()
	b.ResetTimer()
	wg.Add(b.N + 1)
	if err := p.Go(func(w *Worker) {
		for range b.N {
			if err := w.Spawn(done); err != nil {
				b.Error(err)
			}
		}
		wg.Done()
	}); err != nil {
		b.Fatal(err)
	}
	wg.Wait()
}

// BenchmarkSpawnTo measures the directed inbox path.
func BenchmarkSpawnTo(b *testing.B) {
	p := NewPool()
	defer shutdown(b, p)
	n := p.Workers()
	benchSpawnAll(b, func(i int, done func()) error { return p.SpawnTo(i%n, done) })
}

// BenchmarkStealLatency measures how long a task pushed onto a busy
// worker's own deque waits until another worker steals and starts it. The
// pushing worker spins until then, so the task can only be stolen. The other
// workers are idle (parked) at the start of each iteration, so the figure
// includes waking one: it is the latency an idle pool adds to fork-join
// work. Reported as ns/op and as steal-ns (the push-to-start time alone).
func BenchmarkStealLatency(b *testing.B) {
	p := NewPool(WithWorkers(2))
	defer shutdown(b, p)
	var total time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		var started atomic.Bool
		var lat time.Duration
		done := make(chan struct{})
		if err := p.Go(func(w *Worker) {
			t0 := time.Now()
			if err := w.Spawn(func() { lat = time.Since(t0); started.Store(true) }); err != nil {
				b.Error(err)
			}
			for !started.Load() {
			}
			close(done)
		}); err != nil {
			b.Fatal(err)
		}
		<-done
		total += lat
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "steal-ns")
}

// BenchmarkChanWakeLatency is the reference for BenchmarkStealLatency with
// plain Go: a busy goroutine wakes one blocked on a channel and spins until
// it has run. Both are dominated by the runtime (and the OS, and on a VM the
// hypervisor) bringing an idle thread back, not by the pool.
func BenchmarkChanWakeLatency(b *testing.B) {
	ch := make(chan time.Time)
	var started atomic.Bool
	var lat time.Duration
	go func() {
		for t0 := range ch {
			lat = time.Since(t0)
			started.Store(true)
		}
	}()
	defer close(ch)
	var total time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		started.Store(false)
		time.Sleep(50 * time.Microsecond) // let the receiver block again
		ch <- time.Now()
		for !started.Load() {
		}
		total += lat
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "wake-ns")
}

// BenchmarkStealLatencyHot is BenchmarkStealLatency with one long task on
// the pushing worker doing all b.N pushes back to back, so the thief has
// usually not parked yet (it spins for a few microseconds after each steal):
// the steady-state cost of a steal rather than of a wake-up.
func BenchmarkStealLatencyHot(b *testing.B) {
	p := NewPool(WithWorkers(2))
	defer shutdown(b, p)
	done := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	if err := p.Go(func(w *Worker) {
		defer close(done)
		var started atomic.Bool
		mark := func() { started.Store(true) }
		for range b.N {
			started.Store(false)
			if err := w.Spawn(mark); err != nil {
				b.Error(err)
				return
			}
			for !started.Load() {
			}
		}
	}); err != nil {
		b.Fatal(err)
	}
	<-done
}

// BenchmarkSubmitWait measures a Future round trip from outside the pool.
func BenchmarkSubmitWait(b *testing.B) {
	p := NewPool()
	defer shutdown(b, p)
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := Submit(ctx, p, fn).Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSubmitBatch measures Futures amortised: submit many, then wait.
func BenchmarkSubmitBatch(b *testing.B) {
	p := NewPool()
	defer shutdown(b, p)
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	fs := make([]*Future[int], 0, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		fs = fs[:0]
		for ; i < b.N && len(fs) < cap(fs); i++ {
			fs = append(fs, Submit(ctx, p, fn))
		}
		for _, f := range fs {
			if _, err := f.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkBlockingSubmit(b *testing.B) {
	bp := NewBlockingPool(WithQueueSize(1 << 20))
	defer func() { _ = bp.Shutdown(context.Background()) }()
	benchSpawnAll(b, func(_ int, done func()) error { return bp.Spawn(done) })
}

func BenchmarkDequePushPop(b *testing.B) {
	var d deque
	t := taskOf(func() {})
	b.ReportAllocs()
	for range b.N {
		d.push(t)
		d.pop()
	}
}
