package executor

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/veloq/veloq/internal/panicstack"
)

// Worker is one worker of a Pool. A task learns which worker runs it from
// Pool.Go or, for Submit functions, from WorkerFrom(ctx).
//
// Worker.Spawn and Worker.Go push onto the worker's own deque and must be
// called only by the task that the worker is running, on that task's
// goroutine, before the task returns: the deque has a single owner and this
// is how the owner's identity is proven. From anywhere else use the Pool's
// methods.
type Worker struct {
	id   int
	pool *Pool

	// Owner-only fields: touched by this worker's goroutine alone.
	spinning bool   // holds one unit of pool.nspinning
	tick     uint32 // tasks picked, for the every-61st fairness check
	ran      int    // tasks run in the current round (see WithTaskBudget)
	inboxBuf []task // directed tasks taken out of the inbox, run from here
	inboxPos int
	scratch  []task // batches moving into the deque
	spill    []task // the half of a full deque moving to the injector
	nexec    uint64 // tasks run; published to executed
	nlocal   uint64 // Worker.Spawn/Go calls; published to localSpawned

	_  [64]byte // the owner writes the fields above on every task; thieves hammer dq.top
	dq deque
	_  [64]byte

	// state is the park state machine, described at park.
	state atomic.Int32
	wake  chan struct{} // capacity 1; sent to only by the waker that won the CAS from wsParked

	inbox         lockedQueue  // directed tasks (SpawnTo); never stolen
	inboxBuffered atomic.Int64 // len(inboxBuf)-inboxPos as last published, for Stats

	// Counters, written by the owner only. The hottest ones are kept in
	// plain fields and published once per round (publish): a locked
	// instruction per task, or a cache line shared with spawners, would cost
	// as much as a small task.
	executed     atomic.Uint64
	localSpawned atomic.Uint64
	dqLen        atomic.Int64 // deque length as last published, for placement

	// Every Spawn reads inbox.n, dqLen and injected's tail and headHint of
	// two workers (load); keep them off the line of injected.head, which
	// the owner writes on every pop.
	_        [64]byte
	injected injectRing // tasks placed here by Spawn from outside; stealable
	_        [64]byte

	// curCtx is the context of the Submit function the worker is running,
	// if any; WorkerFrom checks it so that a context kept after its
	// function returned does not yield the worker.
	curCtx        atomic.Pointer[workerCtx]
	stolen        atomic.Uint64
	stealAttempts atomic.Uint64
	parks         atomic.Uint64
	panics        atomic.Uint64
}

// ID returns the worker's index, as used by Pool.SpawnTo.
func (w *Worker) ID() int { return w.id }

// Spawn pushes task onto the worker's own deque, where it is run LIFO by the
// worker or stolen FIFO by idle workers. If the deque is full, its older half
// moves to the pool's global injector. Spawn must be called only from a task
// running on w (see Worker). It keeps working while the pool shuts down, so
// that running tasks can finish what they started.
func (w *Worker) Spawn(task func()) error {
	if task == nil {
		return ErrNilTask
	}
	w.spawn(taskOf(task))
	return nil
}

// Go is like Spawn, but hands the task the Worker that eventually runs it.
func (w *Worker) Go(task func(w *Worker)) error {
	if task == nil {
		return ErrNilTask
	}
	w.spawn(wtaskOf(task))
	return nil
}

// spawn is Spawn and Go once the task is known to be non-nil.
func (w *Worker) spawn(t task) {
	spilled := w.pushLocal(t)
	w.nlocal++
	if w.pool.cfg.stealing || spilled {
		w.pool.wakeThief(nil)
	}
}

// pushLocal pushes t onto the deque, moving the older half to the injector
// if the deque is full; it reports whether it did. Owner only.
func (w *Worker) pushLocal(t task) bool {
	if w.dq.push(t) {
		return false
	}
	batch := w.dq.grabHalf(w.spill[:0])
	batch = append(batch, t)
	w.pool.injector.pushBatch(batch)
	clear(batch)
	w.spill = batch[:0]
	return true
}

// load is the placement load used by power-of-two-choices: the lengths of
// the injection queue and the inbox, plus the deque's length as last
// published. Reading the deque's own indices here would pull the owner's
// hottest cache line away from it on every Spawn.
func (w *Worker) load() int64 {
	return w.injected.load() + w.dqLen.Load() + w.inbox.n.Load()
}

// run is the worker's goroutine.
func (w *Worker) run() {
	defer w.pool.workerExited()
	budget := w.pool.cfg.budget
	for {
		t, ok := w.next()
		if !ok {
			t, ok = w.steal()
		}
		if !ok {
			if !w.park() {
				return
			}
			continue
		}
		if w.spinning {
			w.stopSpinning()
		}
		w.exec(t)
		if w.ran++; w.ran >= budget {
			// End of a round: let other goroutines on this thread (the
			// reactors, timers) run before the next one.
			w.ran = 0
			w.publish()
			runtime.Gosched()
		}
	}
}

// fairnessInterval is how often (in tasks) a worker looks at the shared
// queues before its own, as the Go scheduler does with its global run queue.
const fairnessInterval = 61

// next returns the next task from the worker's own queues and the injector.
func (w *Worker) next() (task, bool) {
	w.tick++
	if w.tick%fairnessInterval == 0 {
		if t, ok := w.fromInjector(1); ok {
			return t, true
		}
		if t, ok := w.injected.pop(); ok {
			return t, true
		}
	}
	if t, ok := w.fromInbox(); ok {
		return t, true
	}
	if t, ok := w.dq.pop(); ok {
		return t, true
	}
	if t, ok := w.injected.pop(); ok {
		return t, true
	}
	return w.fromInjector(dequeSize / 2)
}

// fromInbox returns the next directed task. It takes up to a budget of tasks
// out of the inbox at a time, so that posters and the worker meet on the
// inbox lock once per batch.
func (w *Worker) fromInbox() (task, bool) {
	if w.inboxPos == len(w.inboxBuf) {
		if w.inbox.n.Load() == 0 {
			return task{}, false
		}
		w.inboxBuf = w.inbox.popBatch(w.inboxBuf[:0], w.pool.cfg.budget)
		w.inboxPos = 0
		if len(w.inboxBuf) == 0 {
			return task{}, false
		}
		w.inboxBuffered.Store(int64(len(w.inboxBuf) - 1)) // all but the one returned now
	}
	t := w.inboxBuf[w.inboxPos]
	w.inboxBuf[w.inboxPos] = task{}
	w.inboxPos++
	return t, true
}

// fromInjector takes a fair share (at most max) of the global injector.
func (w *Worker) fromInjector(max int) (task, bool) {
	q := &w.pool.injector
	n := q.n.Load()
	if n == 0 {
		return task{}, false
	}
	share := min(int(n)/w.pool.Workers()+1, max)
	return w.takeBatch(q.popBatch(w.scratch[:0], share))
}

// takeBatch returns the first task of batch (the oldest) and pushes the rest
// onto the deque so that the oldest is popped first and the others can be
// stolen.
func (w *Worker) takeBatch(batch []task) (task, bool) {
	if len(batch) == 0 {
		w.scratch = batch
		return task{}, false
	}
	first := batch[0]
	rest := batch[1:]
	slices.Reverse(rest)
	n := w.dq.pushBatch(rest)
	spilled := false
	for _, t := range rest[n:] {
		spilled = w.pushLocal(t) || spilled
	}
	more := len(rest) > 0
	if more {
		w.dqLen.Store(int64(w.dq.len()))
	}
	clear(batch)
	w.scratch = batch[:0]
	if (more && w.pool.cfg.stealing) || spilled {
		w.pool.wakeThief(nil)
	}
	return first, true
}

// exec runs t and counts it.
func (w *Worker) exec(t task) {
	w.call(t)
	w.nexec++
}

// publish makes the owner-only counters visible to Stats.
func (w *Worker) publish() {
	w.executed.Store(w.nexec)
	w.localSpawned.Store(w.nlocal)
	w.inboxBuffered.Store(int64(len(w.inboxBuf) - w.inboxPos))
	w.dqLen.Store(int64(w.dq.len()))
	w.injected.publishHead()
}

// call runs t, recovering a panic so that it cannot take the worker down.
func (w *Worker) call(t task) {
	defer func() {
		if r := recover(); r != nil {
			w.panics.Add(1)
			w.pool.log.Error("executor: task panicked",
				"worker", w.id, "panic", r, "stack", panicstack.Capture())
		}
	}()
	if t.wfn != nil {
		t.wfn(w)
		return
	}
	t.fn()
}

// stealRounds is how many passes over the victims a spinning thief makes
// before it parks. Between passes it backs off exponentially (1, 2, 4 yields).
const stealRounds = 4

// steal looks for work on other workers. Only spinning thieves steal, and at
// most maxSpin workers spin at once; a worker that cannot become one parks.
// With stealing off (WithStealing) it finds nothing.
func (w *Worker) steal() (task, bool) {
	p := w.pool
	ws := p.reg.Load().workers
	n := len(ws)
	if n < 2 || !p.cfg.stealing {
		return task{}, false
	}
	if !w.spinning {
		if !w.acquireSpin() {
			return task{}, false
		}
		w.spinning = true
	}
	for round := 0; round < stealRounds; round++ {
		off := rand.IntN(n)
		for i := range n {
			v := ws[(off+i)%n]
			if v == w {
				continue
			}
			w.stealAttempts.Add(1)
			if t, ok := w.stealFrom(v); ok {
				return t, true
			}
		}
		if w.inbox.n.Load() > 0 || w.injected.ready() || p.injector.n.Load() > 0 {
			return task{}, false // work for us arrived; park's re-check finds it
		}
		for range 1 << round >> 1 { // exponential backoff: 0, 1, 2, 4 yields
			runtime.Gosched()
		}
	}
	return task{}, false
}

// stealFrom steals half (rounded up) of v's deque, or failing that half of
// v's injection queue. The first task is returned, the rest go onto w's
// deque.
func (w *Worker) stealFrom(v *Worker) (task, bool) {
	if size := v.dq.len(); size > 0 {
		first, ok := v.dq.steal()
		if !ok {
			first, ok = v.dq.steal() // one retry on a lost race
		}
		if ok {
			got := 1
			for want := size - size/2; got < want; got++ {
				t, ok := v.dq.steal()
				if !ok {
					break
				}
				w.pushLocal(t)
			}
			w.stolen.Add(uint64(got))
			return first, true
		}
	}
	if v.injected.ready() {
		batch := v.injected.popHalf(w.scratch[:0], ringSize/2)
		if len(batch) > 0 {
			w.stolen.Add(uint64(len(batch)))
			return w.takeBatch(batch)
		}
		w.scratch = batch
	}
	return task{}, false
}

// stopSpinning is called by a spinning thief that found work. If it was the
// last spinner and stealable work is still visible anywhere, it wakes
// another worker: spawners skipped their wake-ups because it was spinning.
// The check is after the decrement, and those spawners published their tasks
// before they saw it spinning, so the scan sees every such task that is
// still queued; if it sees none, no wake-up is owed. (Go's scheduler wakes
// unconditionally here; scanning first avoids waking a worker per task when
// a single producer feeds the pool.)
func (w *Worker) stopSpinning() {
	w.spinning = false
	if w.pool.nspinning.Add(-1) == 0 && w.surplus() {
		w.pool.wakeThief(nil)
	}
}

// surplus reports whether stealable work is queued anywhere.
func (w *Worker) surplus() bool {
	if w.pool.injector.n.Load() > 0 {
		return true
	}
	return w.pool.cfg.stealing &&
		(w.dq.len() > 0 || w.injected.ready() || w.othersHaveWork())
}

// Worker park states.
//
// A worker that found no work parks with this protocol (PARKING, double
// check, PARKED), which pairs with the wakers in pool.go (notify for directed
// work, wakeThief for stealable work):
//
//	wsRunning ──park──▶ wsParking ──re-check finds nothing──▶ wsParked ──▶ blocks on wake
//	                        │  └──re-check finds work: CAS back to wsRunning
//	                        └──closed and nothing queued: CAS to wsExited
//	wsParking/wsParked ──waker's CAS──▶ wsNotified | wsNotifiedSpinning ──worker──▶ wsRunning
//
// The worker first counts itself in nparked and stores wsParking, then
// re-checks the queues. A spawner first publishes its task, then reads
// nparked/state. All of these are sequentially consistent atomics, so in
// every interleaving either the spawner sees the worker parking or parked
// (and wakes it with a CAS), or the worker's re-check sees the task: no
// wake-up is lost. Only the waker whose CAS moved the worker out of wsParked
// sends on the wake channel, so the channel (capacity 1) never blocks the
// waker and never holds a stale token. A waker that finds the worker still
// in wsParking does not send at all: the worker's own CAS from wsParking to
// wsParked fails and it never blocks.
//
// What the re-check covers: the worker's inbox, deque and injection ring,
// the injector, and every other worker's deque and injection ring (not with
// stealing off: then nobody else's queues concern it, and a spawner wakes
// the worker it placed a task on with notify, as for directed work). Own
// work cancels the park. Stealable work elsewhere makes the worker try to
// become a spinning thief; if no spinning slot is free it parks anyway,
// because whoever holds the slot is then responsible for that work: a
// spinning thief, which either wakes the next worker when it stops spinning
// or re-checks everything itself when it parks, or a waker holding the token
// for a moment, which after giving it back looks at nparked again and so
// sees this worker. That is what makes "wake only when none spins" safe.
// (Go's scheduler, runtime/proc.go findRunnable, re-checks other run queues
// only in Ms that were spinning; it can, because a goroutine's run queue
// belongs to a running P. Here the owner of a deque may be busy for a long
// time, in a task that waits for its own children to be stolen, so every
// parking worker looks.)
//
// The waker of stealable work (wakeThief) hands over the spinning token with
// wsNotifiedSpinning, so the woken worker counts as the spinning thief from
// the moment of the CAS and further spawners do not wake a herd.
const (
	wsRunning          int32 = iota // running tasks or looking for them
	wsParking                       // announced, re-checking the queues
	wsParked                        // blocked on wake
	wsNotified                      // woken by a waker for directed work
	wsNotifiedSpinning              // woken and handed the spinning token
	wsExited                        // gone; its inbox and injection queue are closed
)

// park blocks the worker until it is woken. It returns false when the
// worker must exit (the pool is closed and nothing is left for it).
func (w *Worker) park() bool {
	p := w.pool
	w.publish()
	if w.spinning {
		w.spinning = false
		p.nspinning.Add(-1)
	}
	w.dq.clear()
	w.inbox.trim()
	p.injector.trim()

	p.nparked.Add(1)
	w.state.Store(wsParking)

	// The double check.
	if w.hasOwnWork() {
		return w.cancelPark()
	}
	if w.pool.cfg.stealing && w.othersHaveWork() && w.acquireSpin() {
		return w.cancelParkSpinning()
	}
	if p.closed.Load() {
		if w.tryExit() {
			return false
		}
		return w.cancelPark()
	}
	if !w.state.CompareAndSwap(wsParking, wsParked) {
		w.wokeUp() // a waker got here between the check and the CAS
		return true
	}
	w.parks.Add(1)
	select {
	case <-w.wake:
	case <-p.quit:
		if w.state.CompareAndSwap(wsParked, wsRunning) {
			p.nparked.Add(-1)
			return true // loop round: drain, then exit through tryExit
		}
		<-w.wake // a waker's CAS won; its send is on the way
	}
	w.wokeUp()
	return true
}

// acquireSpin takes a spinning slot if one is free (at most maxSpin).
func (w *Worker) acquireSpin() bool {
	p := w.pool
	for {
		s := p.nspinning.Load()
		if s >= p.maxSpin {
			return false
		}
		if p.nspinning.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// cancelParkSpinning leaves wsParking holding the spinning slot it has just
// taken. If a waker handed it a token meanwhile, it keeps one of the two.
func (w *Worker) cancelParkSpinning() bool {
	if w.state.CompareAndSwap(wsParking, wsRunning) {
		w.pool.nparked.Add(-1)
		w.spinning = true
		return true
	}
	if w.state.Load() == wsNotifiedSpinning {
		// Two tokens: give ours back. We keep spinning with the waker's,
		// so we still owe the re-check that a release calls for.
		w.pool.nspinning.Add(-1)
	}
	w.wokeUp()
	w.spinning = true
	return true
}

// cancelPark leaves wsParking because there is work after all.
func (w *Worker) cancelPark() bool {
	if w.state.CompareAndSwap(wsParking, wsRunning) {
		w.pool.nparked.Add(-1)
		return true
	}
	w.wokeUp()
	return true
}

// wokeUp completes a wake-up: the waker has set wsNotified or
// wsNotifiedSpinning and already taken the worker out of nparked.
func (w *Worker) wokeUp() {
	if w.state.Load() == wsNotifiedSpinning {
		w.spinning = true
	}
	w.state.Store(wsRunning)
}

func (w *Worker) hasOwnWork() bool {
	return w.inboxPos < len(w.inboxBuf) ||
		w.inbox.n.Load() > 0 ||
		w.dq.len() > 0 ||
		w.injected.ready() ||
		w.pool.injector.n.Load() > 0
}

func (w *Worker) othersHaveWork() bool {
	for _, v := range w.pool.reg.Load().workers {
		if v != w && (v.dq.len() > 0 || v.injected.ready()) {
			return true
		}
	}
	return false
}

// tryExit is called in wsParking once the pool is closed and the re-check
// found nothing. It closes the worker's inbox and injection queue (under
// their locks, so a racing push either lands before and is seen, or fails
// with ErrClosed) and moves to wsExited. Work still queued on other workers
// is left to them: each drains its own queues before it exits.
func (w *Worker) tryExit() bool {
	if !w.inbox.closeIfEmpty() || !w.injected.closeIfEmpty() {
		return false
	}
	if w.pool.injector.n.Load() > 0 || w.pool.spilling.Load() > 0 {
		return false
	}
	if !w.state.CompareAndSwap(wsParking, wsExited) {
		return false
	}
	w.pool.nparked.Add(-1)
	w.inboxBuf, w.scratch, w.spill = nil, nil, nil
	return true
}
