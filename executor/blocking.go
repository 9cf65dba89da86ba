package executor

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veloq/veloq/internal/panicstack"
)

// BlockingPool runs functions that block (file I/O, DNS, cgo, syscalls
// without a non-blocking form) so that they never stall a reactor or a Pool
// worker. It grows from zero up to a bound of goroutines; a goroutine that
// has been idle for the idle timeout exits. When every goroutine is busy,
// tasks wait in a bounded queue; when that is full too, Spawn fails with
// ErrOverloaded instead of queueing for ever.
//
// A task is handed straight to an idle goroutine when there is one (the most
// recently idle, so that the others time out and the pool shrinks), else a
// new goroutine is started for it, else it is queued.
type BlockingPool struct {
	cfg blockingConfig
	log *slog.Logger

	mu         sync.Mutex
	queue      taskRing   // tasks waiting for a goroutine; at most cfg.queueSize
	idle       []*handoff // idle goroutines, most recently idle last
	goroutines int        // live goroutines
	closed     bool

	wg       sync.WaitGroup
	waitOnce sync.Once
	done     chan struct{} // closed when every goroutine has exited after Shutdown

	submitted, completed, rejected, panics, idleExits atomic.Uint64
	peak                                              atomic.Int64
}

// handoff is how a task reaches an idle goroutine of a BlockingPool (one
// handoff per goroutine). Its channel has capacity 1 and
// receives exactly one task per idle period, from the submitter that took it
// off the idle list; a nil task tells it to exit.
type handoff struct {
	ch chan func()
}

// NewBlockingPool returns a blocking pool. It starts no goroutine until work
// arrives.
func NewBlockingPool(opts ...BlockingOption) *BlockingPool {
	cfg := newBlockingConfig(opts)
	return &BlockingPool{cfg: cfg, log: cfg.logger, done: make(chan struct{})}
}

// Spawn runs task on one of the pool's goroutines. It returns ErrOverloaded
// if as many goroutines as WithMaxGoroutines allows are busy and the queue
// is full, and ErrClosed after Shutdown has begun. Once it returns nil the
// task will run. To get a result back as a *Future, use SubmitBlocking
// instead.
func (b *BlockingPool) Spawn(task func()) error {
	if task == nil {
		return ErrNilTask
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	if n := len(b.idle); n > 0 {
		t := b.idle[n-1]
		b.idle[n-1] = nil
		b.idle = b.idle[:n-1]
		b.submitted.Add(1)
		b.mu.Unlock()
		t.ch <- task
		return nil
	}
	if b.goroutines < b.cfg.maxGoroutines {
		b.goroutines++
		b.wg.Add(1)
		if int64(b.goroutines) > b.peak.Load() {
			b.peak.Store(int64(b.goroutines))
		}
		b.submitted.Add(1)
		b.mu.Unlock()
		go b.serve(task)
		return nil
	}
	if b.queue.len() >= b.cfg.queueSize {
		b.mu.Unlock()
		b.rejected.Add(1)
		return ErrOverloaded
	}
	b.queue.push(taskOf(task))
	b.submitted.Add(1)
	b.mu.Unlock()
	return nil
}

// serve is the body of one goroutine. It runs task, then keeps taking work
// from the queue; with none, it goes on the idle list and waits for a
// hand-off until the idle timeout, then exits.
func (b *BlockingPool) serve(task func()) {
	defer b.wg.Done()
	t := &handoff{ch: make(chan func(), 1)}
	timer := time.NewTimer(b.cfg.idleTimeout)
	timer.Stop()
	for {
		b.call(task)
		b.completed.Add(1)

		b.mu.Lock()
		if next, ok := b.queue.pop(); ok {
			b.mu.Unlock()
			task = next.fn
			continue
		}
		if b.closed {
			b.goroutines--
			b.mu.Unlock()
			return
		}
		b.idle = append(b.idle, t)
		b.mu.Unlock()

		timer.Reset(b.cfg.idleTimeout)
		select {
		case task = <-t.ch:
			timer.Stop()
		case <-timer.C:
			b.mu.Lock()
			if i := slices.Index(b.idle, t); i >= 0 {
				b.idle = slices.Delete(b.idle, i, i+1)
				b.goroutines--
				b.mu.Unlock()
				b.idleExits.Add(1)
				return
			}
			b.mu.Unlock()
			// A submitter took t off the idle list just before the timer
			// fired; its task is on the way.
			task = <-t.ch
		}
		if task == nil { // Shutdown
			b.mu.Lock()
			b.goroutines--
			b.mu.Unlock()
			return
		}
	}
}

func (b *BlockingPool) call(task func()) {
	defer func() {
		if r := recover(); r != nil {
			b.panics.Add(1)
			b.log.Error("executor: blocking task panicked", "panic", r, "stack", panicstack.Capture())
		}
	}()
	task()
}

// Shutdown stops the pool accepting tasks, lets running and queued tasks
// finish, and waits for every goroutine to exit or for ctx to be done. It
// returns nil once all have exited, else an error wrapping ctx.Err(). It may
// be called more than once.
func (b *BlockingPool) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		for _, t := range b.idle {
			t.ch <- nil
		}
		b.idle = nil
	}
	b.mu.Unlock()
	b.waitOnce.Do(func() {
		go func() {
			b.wg.Wait()
			close(b.done)
		}()
	})
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("executor: blocking pool shutdown: %w", ctx.Err())
	}
}

// BlockingStats is a snapshot of a BlockingPool's counters.
type BlockingStats struct {
	Goroutines     int    // live goroutines
	Idle           int    // goroutines waiting for work
	Queued         int    // tasks waiting for a goroutine
	PeakGoroutines int    // most goroutines alive at once
	Submitted      uint64 // tasks accepted
	Completed      uint64 // tasks finished (including those that panicked)
	Rejected       uint64 // tasks refused with ErrOverloaded
	Panics         uint64 // tasks that panicked
	IdleExits      uint64 // goroutines that exited after the idle timeout
}

// Stats returns a snapshot of the pool's counters.
func (b *BlockingPool) Stats() BlockingStats {
	b.mu.Lock()
	s := BlockingStats{Goroutines: b.goroutines, Idle: len(b.idle), Queued: b.queue.len()}
	b.mu.Unlock()
	s.PeakGoroutines = int(b.peak.Load())
	s.Submitted = b.submitted.Load()
	s.Completed = b.completed.Load()
	s.Rejected = b.rejected.Load()
	s.Panics = b.panics.Load()
	s.IdleExits = b.idleExits.Load()
	return s
}
