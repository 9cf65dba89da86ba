package executor

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool is a work-stealing pool of workers for CPU-bound tasks.
//
// Each worker has three queues, looked at in this order when it needs work:
// its directed inbox (SpawnTo; never stolen), its local Chase-Lev deque
// (Worker.Spawn, plus batches it moves in from the other queues), its
// injection ring (Spawn from outside the pool: a fixed 256-slot lock-free
// ring), and the pool's global injector, which takes the older half of a
// deque or ring that overflows. Every 61st task the worker looks at the
// shared queues first, so a worker busy with its own tasks cannot starve
// them. A worker with nothing left steals half of a random victim's deque
// (or injection ring), then parks.
//
// A Pool must be created with NewPool and should be shut down with Shutdown,
// which is what makes its goroutines exit.
type Pool struct {
	// Read on every Spawn, written once: kept on lines of their own.
	cfg     config
	log     *slog.Logger
	reg     atomic.Pointer[registry] // the immutable worker registry; readers take no lock
	closed  atomic.Bool
	maxSpin int32
	_       [64]byte

	// injector receives the overflow of local deques and injection rings.
	injector lockedQueue
	spilling atomic.Int32 // spawners moving a full ring to the injector
	_        [60]byte

	// nspinning counts workers that are searching other workers' queues
	// (spinning thieves), at most maxSpin. nparked counts workers in the
	// parking or parked state (see worker.go).
	nspinning atomic.Int32
	_         [60]byte
	nparked   atomic.Int32
	_         [60]byte

	closeOnce sync.Once
	quit      chan struct{} // closed by Shutdown: parked workers wake and drain
	live      atomic.Int32  // workers not yet exited
	done      chan struct{} // closed when the last worker exits
}

// registry is an immutable snapshot of the workers.
type registry struct {
	workers []*Worker
}

// NewPool starts a pool. By default it has runtime.GOMAXPROCS(0) workers.
func NewPool(opts ...Option) *Pool {
	cfg := newConfig(opts)
	p := &Pool{
		cfg:     cfg,
		log:     cfg.logger,
		maxSpin: int32(max(1, cfg.workers/2)),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	ws := make([]*Worker, cfg.workers)
	for i := range ws {
		ws[i] = &Worker{
			id:   i,
			pool: p,
			wake: make(chan struct{}, 1),
		}
		ws[i].injected.init()
	}
	p.reg.Store(&registry{workers: ws})
	p.live.Store(int32(len(ws)))
	for _, w := range ws {
		go w.run()
	}
	return p
}

// Workers returns the number of workers.
func (p *Pool) Workers() int { return len(p.reg.Load().workers) }

// Spawn schedules task on the pool. The task may run on any worker.
//
// Spawn places the task on the less loaded of two randomly chosen workers,
// where load is the length of the worker's injection queue, local deque and
// inbox. Code already running on a worker should prefer Worker.Spawn, which
// pushes onto that worker's own deque without taking a lock (see the package
// documentation for why Spawn cannot detect this by itself).
//
// Spawn never blocks. When the worker it chose already has more than 256
// tasks waiting (counting the pool's overflow queue) it yields the processor
// with runtime.Gosched before it returns: a producer that outruns the pool
// then lends the workers its CPU instead of growing the queues without
// bound, and the queues stay small enough to stay in cache.
//
// Once Spawn returns nil the task will run, even if Shutdown begins
// meanwhile. After Shutdown has begun Spawn returns ErrClosed.
func (p *Pool) Spawn(task func()) error {
	if task == nil {
		return ErrNilTask
	}
	return p.inject(taskOf(task))
}

// Go is like Spawn, but hands the task the Worker that runs it, so that the
// task can push follow-up work onto that worker's deque with Worker.Spawn.
func (p *Pool) Go(task func(w *Worker)) error {
	if task == nil {
		return ErrNilTask
	}
	return p.inject(wtaskOf(task))
}

func taskOf(fn func()) task         { return task{fn: fn} }
func wtaskOf(fn func(*Worker)) task { return task{wfn: fn} }

// yieldAbove is the backlog above which Spawn yields (see Spawn).
const yieldAbove = ringSize

// inject places t by power-of-two-choices.
func (p *Pool) inject(t task) error {
	if p.closed.Load() {
		return ErrClosed
	}
	w := p.choose(p.reg.Load().workers)
	spilled := false
	for {
		r := w.injected.push(t)
		if r == pushClosed {
			return ErrClosed // w has exited: the pool is shutting down
		}
		if r == pushOK {
			break
		}
		if spilled = p.spill(w, t); spilled {
			break
		}
		// w drained its ring meanwhile: push again.
	}
	if p.cfg.stealing || spilled {
		p.wakeThief(w)
	} else {
		p.notify(w) // only w may take it: wake w itself if it is parked
	}
	if w.injected.load()+p.injector.n.Load() > yieldAbove {
		runtime.Gosched()
	}
	return nil
}

// spill handles a full injection ring the way Go's scheduler handles a full
// run queue: it moves the older half of w's ring, and t after it, to the
// global injector under one lock, so that the next ringSize/2 spawns onto w
// take the lock-free path again. It reports false if the ring had emptied.
//
// spilling lets an exiting worker know that tasks are on their way to the
// injector: between taking them out of the ring and pushing them, they are
// in no queue at all (see tryExit).
func (p *Pool) spill(w *Worker, t task) bool {
	p.spilling.Add(1)
	defer p.spilling.Add(-1)
	var buf [ringSize/2 + 1]task
	batch := w.injected.popHalf(buf[:0], ringSize/2)
	if len(batch) == 0 {
		return false
	}
	batch = append(batch, t)
	p.injector.pushBatch(batch)
	w.injected.spilled.Add(1)
	return true
}

// choose returns the less loaded of two distinct random workers.
func (p *Pool) choose(ws []*Worker) *Worker {
	n := uint64(len(ws))
	if n == 1 {
		return ws[0]
	}
	r := rand.Uint64() // per-thread generator in the runtime: no shared lock
	// Two indices from the two halves of r, scaled by multiply-and-shift
	// (Lemire's range reduction) rather than %: a 64-bit division costs
	// more than the rest of the choice.
	i := (r & 0xffffffff) * n >> 32
	j := (r >> 32) * (n - 1) >> 32
	if j >= i {
		j++
	}
	a, b := ws[i], ws[j]
	if b.load() < a.load() {
		return b
	}
	return a
}

// SpawnTo schedules task on the given worker's inbox. Directed tasks are
// never stolen; a worker runs its inbox before anything else.
func (p *Pool) SpawnTo(worker int, task func()) error {
	if task == nil {
		return ErrNilTask
	}
	ws := p.reg.Load().workers
	if worker < 0 || worker >= len(ws) {
		return fmt.Errorf("%w: %d (pool has %d workers)", ErrInvalidWorker, worker, len(ws))
	}
	if p.closed.Load() {
		return ErrClosed
	}
	w := ws[worker]
	if !w.inbox.push(taskOf(task)) {
		return ErrClosed
	}
	p.notify(w)
	return nil
}

// Shutdown stops the pool accepting work (Spawn, Go, SpawnTo and Submit then
// fail with ErrClosed), lets the workers run everything already queued,
// including the tasks that running tasks push with Worker.Spawn, and waits
// for the workers to exit or for ctx to be done, whichever comes first. It
// returns nil once every worker has exited, or an error wrapping ctx.Err().
// It may be called more than once.
func (p *Pool) Shutdown(ctx context.Context) error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		close(p.quit)
	})
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("executor: pool shutdown: %w", ctx.Err())
	}
}

func (p *Pool) workerExited() {
	if p.live.Add(-1) == 0 {
		close(p.done)
	}
}

// Wake-ups. The worker side of this protocol (the states and the park
// sequence) is described in worker.go next to park.

// notify makes sure worker w looks at its inbox: a directed task can be run
// by w only, so w is woken whatever the thieves are doing. The caller has
// published the task before calling notify. If w is running, already
// notified or exited (its inbox is closed), there is nothing to do.
func (p *Pool) notify(w *Worker) { w.wakeAs(wsNotified) }

// wakeThief is called after stealable work has been published (with
// stealing off, only work in the injector counts as such). It wakes one
// parked worker, preferring pref, and hands it the spinning token — but only
// when some worker is parked and no thief is spinning already: a spinning
// thief will find the work, and when it stops spinning it either wakes the
// next worker or re-checks every queue before parking. That is what rules out
// both lost wake-ups and a thundering herd.
func (p *Pool) wakeThief(pref *Worker) {
	for retry := 0; ; retry++ {
		if p.nparked.Load() <= 0 {
			return // anyone who parks from now on re-checks the queues
		}
		if !p.nspinning.CompareAndSwap(0, 1) {
			return // a spinning thief is responsible
		}
		if p.handToken(pref) {
			return
		}
		// Nobody could take the token: the parked worker we counted has
		// woken, or has counted itself in nparked without announcing
		// wsParking yet. While we held the token, a parking worker that
		// saw stealable work could not take a spinning slot and left that
		// work to us (see park), so give the token back and look at
		// nparked again rather than just returning.
		p.nspinning.Add(-1)
		if retry > 0 {
			runtime.Gosched()
		}
	}
}

// handToken moves one parking or parked worker to wsNotifiedSpinning. The
// caller holds the spinning token and gives it to that worker.
func (p *Pool) handToken(pref *Worker) bool {
	if pref != nil && pref.tryWakeSpinning() {
		return true
	}
	ws := p.reg.Load().workers
	n := len(ws)
	off := rand.IntN(n)
	for i := range n {
		if ws[(off+i)%n].tryWakeSpinning() {
			return true
		}
	}
	return false
}

// tryWakeSpinning wakes w with the spinning token if w is parking or parked.
func (w *Worker) tryWakeSpinning() bool { return w.wakeAs(wsNotifiedSpinning) }

// wakeAs moves w from wsParking or wsParked to the notified state to,
// taking it out of nparked. Only the waker whose CAS moved w out of
// wsParked sends on w.wake; a worker still in wsParking sees the new state
// when its own CAS fails. It reports false if w was in neither state.
func (w *Worker) wakeAs(to int32) bool {
	for {
		switch w.state.Load() {
		case wsParking:
			if w.state.CompareAndSwap(wsParking, to) {
				w.pool.nparked.Add(-1)
				return true
			}
		case wsParked:
			if w.state.CompareAndSwap(wsParked, to) {
				w.pool.nparked.Add(-1)
				w.wake <- struct{}{}
				return true
			}
		default:
			return false
		}
	}
}

// PoolStats is a snapshot of a Pool's counters. Counters are read one by
// one while the pool runs, so the totals are approximate; a busy worker
// publishes its Executed count and its local spawns once per round (see
// WithTaskBudget) and whenever it parks, so they are exact once the pool is idle.
type PoolStats struct {
	Workers []WorkerStats

	// Totals over Workers.
	Spawned, Executed, Stolen, StealAttempts, Parks, Panics uint64
	QueueLen                                                int

	Injector int // tasks in the global injector
	Spinning int // workers searching for work to steal
	Parked   int // workers parked or about to park
}

// WorkerStats are the counters of one worker.
type WorkerStats struct {
	ID            int
	Spawned       uint64 // tasks placed on this worker (any queue)
	Executed      uint64 // tasks this worker ran
	Stolen        uint64 // tasks this worker stole from others
	StealAttempts uint64 // victims this worker tried to steal from
	Parks         uint64 // times this worker blocked for lack of work
	Panics        uint64 // tasks that panicked on this worker
	QueueLen      int    // tasks waiting in its inbox, deque and injection queue
}

// Stats returns a snapshot of the pool's counters.
func (p *Pool) Stats() PoolStats {
	ws := p.reg.Load().workers
	s := PoolStats{
		Workers:  make([]WorkerStats, len(ws)),
		Injector: p.injector.len(),
		Spinning: int(p.nspinning.Load()),
		Parked:   int(max(0, p.nparked.Load())),
	}
	for i, w := range ws {
		ww := WorkerStats{
			ID:            w.id,
			Spawned:       w.inbox.pushedCount() + w.injected.pushedCount() + w.localSpawned.Load(),
			Executed:      w.executed.Load(),
			Stolen:        w.stolen.Load(),
			StealAttempts: w.stealAttempts.Load(),
			Parks:         w.parks.Load(),
			Panics:        w.panics.Load(),
			QueueLen:      w.inbox.len() + int(w.inboxBuffered.Load()) + w.dq.len() + w.injected.len(),
		}
		s.Workers[i] = ww
		s.Spawned += ww.Spawned
		s.Executed += ww.Executed
		s.Stolen += ww.Stolen
		s.StealAttempts += ww.StealAttempts
		s.Parks += ww.Parks
		s.Panics += ww.Panics
		s.QueueLen += ww.QueueLen
	}
	s.QueueLen += s.Injector
	return s
}
