package net

import (
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/veloq/veloq/bufpool"
	"github.com/veloq/veloq/internal/affinity"
	"github.com/veloq/veloq/internal/mpsc"
	"github.com/veloq/veloq/internal/panicstack"
)

// Park states; see "Park and wake" in ARCHITECTURE.md.
const (
	stateRunning int32 = iota
	stateParking
	stateParked
)

// Loop is one event loop: a goroutine locked to an OS thread, driving one
// backend and the connections on it. A handler reaches its connection's
// loop with Conn.Loop (to Post, Dial or set timers), and a Server's loops
// are Server.Loops. NewLoop and Close are the engine's, for a loop
// without a Server.
type Loop struct {
	id      int
	cfg     Config
	log     *slog.Logger
	be      backend
	backend Backend

	inbox   *mpsc.Queue[func()]
	state   atomic.Int32
	closed  atomic.Bool  // set once the loop stops accepting posts
	posting atomic.Int32 // posters between their closed check and their push

	deferred, deferredSpare []func()
	outSpare                []byte     // the segment Conn.AvailableBuffer lends (outq.go)
	segFree                 [][]outSeg // output queues' segment lists, free for reuse (outQueue.push)
	timers                  timerHeap
	epoch                   time.Time
	now                     int64 // loop clock at the top of the iteration

	conns     table[*Conn] // slot table; a slot is reused only after released
	free      []uint32
	dirty     []*Conn
	listeners []*listener
	nconn     atomic.Int64
	udp       udpLoop // datagram sockets (udp_loop.go)

	cache  *bufpool.Cache
	splice loopSplice // splice pipes kept for reuse (splice.go)
	// chunk is the receive buffer (io_uring's, or epoll's read buffer)
	// being presented to conn's
	// OnData (ForwardTo may keep it: kept). The receive buffers kept and
	// not yet recycled are counted in stats.heldBufs, which ForwardTo also
	// reads for its per-loop bound.
	chunk struct {
		conn *Conn
		bid  int32 // -1: not one the backend lends (TLS plaintext, portable)
		kept bool
	}
	tls   loopTLS   // TLS scratch and handshakes (tls.go, tls_handshake.go)
	files loopFiles // SendFile's state (sendfile.go)

	outPeak   int    // largest pending output of one connection (Stats.PeakConnOutput)
	inPeak    int    // largest buffered input of one connection (Stats.PeakConnInput)
	more      bool   // work is known to be pending: poll without blocking
	reports   uint64 // backend reports in the current poll (tick)
	lastYield int64  // loop clock of the last runtime.Gosched (yieldEvery)
	// ctr counts on the loop's hot path without atomic operations;
	// publish copies it into stats once per iteration.
	ctr struct{ bytesIn, bytesOut, iterations, completions uint64 }
	// timerPeak is the most timers run in one iteration (tests check it
	// against the budget).
	timerPeak int
	stopping  bool
	draining  bool // a graceful Shutdown started (shutdown.go)

	// closes counts the connections whose teardown began in this
	// iteration (runTimers stops at closesPerIteration).
	closes int

	// told counts the open connections OnShutdown was called on; the
	// loop writes it, Server.NumShuttingDown reads it.
	told    atomic.Int64
	stopped chan struct{}

	tid           int  // the loop's OS thread (goroutine if unlocked), for InLoop
	unlocked      bool // an unpinned portable loop: not locked to its thread
	lastAcceptLog int64
	stats         loopCounters
	// coro is the id (as tid) of the handshake coroutine the loop runs now
	// (0: none), for InLoop: a coroutine is a goroutine of its own, which
	// on Linux a locked loop's thread id covers, but not elsewhere.
	coro atomic.Int64

	// User code (handler callbacks, posted, timer, deferred and drain
	// functions) runs between enterUser and leaveUser. userSeq counts the
	// entries and exits, so it is odd exactly while user code runs; the
	// loop alone writes it (one atomic store each way) and others read
	// it: Conn methods called while it is even are not on the loop
	// (ErrNotOnLoop), and the watchdog sees a value that stays odd for a
	// whole interval as a callback blocking the loop.
	userSeq     atomic.Uint64
	userSeqLoop uint64 // the loop's copy of userSeq
	// stalledSeq is the userSeq value of a user call the watchdog saw run
	// past Config.BlockThreshold, and stalledAt when it first saw it; the
	// loop logs the call when it returns. Keyed by the sequence, so a flag
	// set just as a call ended is never blamed on the next one.
	stalledSeq     atomic.Uint64
	stalledAt      atomic.Int64
	lastStallLog   int64
	lastPanicLog   int64
	panicsUnlogged int
	closeErr       error // what stopping the backend returned
}

type loopCounters struct {
	accepted, closed, bytesIn, bytesOut     atomic.Uint64
	iterations, parks, wakeups, posts       atomic.Uint64
	completions, panics, acceptErrs, dialed atomic.Uint64
	spliced, inPlace, blocked               atomic.Uint64
	heldBufs, outPeak, inPeak, cached       atomic.Int64
	tlsHandshakes, tlsErrors                atomic.Uint64
	tlsTimeouts, tlsRefused                 atomic.Uint64
	drained, cut                            atomic.Uint64
}

// Stats is a snapshot of a loop's counters.
type Stats struct {
	ID          int
	Backend     Backend
	Conns       int64  // open connections now
	Accepted    uint64 // connections accepted
	Dialed      uint64 // outbound connections started
	Closed      uint64 // connections finalized
	BytesIn     uint64
	BytesOut    uint64
	Iterations  uint64 // loop iterations
	Parks       uint64 // times the loop blocked waiting for events
	Wakeups     uint64 // eventfd writes by posters (a parked loop woken)
	Posts       uint64 // closures posted to the inbox
	Completions uint64 // backend events/completions dispatched
	Panics      uint64 // handler panics recovered
	// Blocked counts user calls (handler callbacks, posted or timer
	// functions) that ran past Config.BlockThreshold, stalling every other
	// connection of the loop meanwhile.
	Blocked    uint64
	AcceptErrs uint64 // accept failures (EMFILE and friends)
	Spliced    uint64 // bytes moved by splices (also in BytesIn/BytesOut)
	// InPlace counts bytes ForwardTo sent straight from receive buffers
	// (io_uring's, epoll's read buffers), HeldBufs the receive buffers it
	// holds now (queued or being sent; they are back with the backend once
	// sent or dropped).
	InPlace  uint64
	HeldBufs int64
	// PeakConnOutput is the most output any one connection had pending
	// (written, not yet taken by the kernel) since the loop started: with
	// the write water marks it stays near WriteHighWater.
	PeakConnOutput int64
	// PeakConnInput is the most input any one connection had buffered
	// (received, not consumed by its handler) since the loop started.
	PeakConnInput int64
	// CachedBytes is what the loop's buffer cache keeps for reuse, at most
	// Config.CacheBytes.
	CachedBytes int64
	// TLS (WithTLS): handshakes completed; connections closed because the
	// peer's handshake or records failed (bad input, an alert, a failed
	// certificate check); handshakes past the handshake timeout; new
	// connections refused past the bound on concurrent handshakes.
	TLSHandshakes        uint64
	TLSHandshakeErrors   uint64
	TLSHandshakeTimeouts uint64
	TLSRefused           uint64
	// Drained counts the connections that ended during a graceful
	// Shutdown before its context did (by themselves, or as a
	// ShutdownHandler ended them); Cut those Shutdown closed when its
	// context ended (ErrClosed). Drained+Cut is the number of
	// connections a Shutdown found open (or that opened meanwhile).
	Drained uint64
	Cut     uint64
}

// NewLoop is part of the engine, for a loop without a Server (Listen and
// NewServer start theirs): it starts a loop and returns once its thread
// and backend are ready, or with the error that prevented it (for
// BackendUring, the io_uring setup error; BackendAuto falls back to epoll
// instead, logging why once).
func NewLoop(id int, cfg Config) (*Loop, error) {
	cfg.setDefaults()
	l := &Loop{
		id:      id,
		cfg:     cfg,
		log:     cfg.Logger.With("loop", id),
		inbox:   mpsc.New[func()](),
		epoch:   time.Now(),
		cache:   bufpool.NewCache(cfg.Pool, 64),
		stopped: make(chan struct{}),
	}
	l.cache.SetMaxBytes(int64(cfg.CacheBytes))
	ready := make(chan error, 1)
	go l.run(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return l, nil
}

// ID returns the loop's index.
func (l *Loop) ID() int { return l.id }

// Backend returns the backend the loop runs on (never BackendAuto).
func (l *Loop) Backend() Backend { return l.backend }

// NumConns returns the number of open connections. Safe from any goroutine.
func (l *Loop) NumConns() int { return int(l.nconn.Load()) }

// Done is closed when the loop has stopped and released its resources.
func (l *Loop) Done() <-chan struct{} { return l.stopped }

// InLoop reports whether the caller runs on l's goroutine, or on the
// coroutine of a TLS handshake the loop is running (which stands in for
// it). The loop's goroutine is locked to one OS thread for its whole life
// and no other goroutine runs on a locked thread, so comparing thread ids
// is exact; an unpinned portable loop, which is not locked, compares
// goroutine ids. Outside Linux threadID names goroutines too, and a
// handshake coroutine is a goroutine of its own on the loop's thread, so
// the step that runs one names it (coro). It costs a system call or a
// stack header: use it in assertions, not on hot paths.
func (l *Loop) InLoop() bool {
	id := l.callerID()
	return id == l.tid || int64(id) == l.coro.Load()
}

// callerID names the caller as tid names the loop: its thread, or its
// goroutine when the loop is unlocked.
func (l *Loop) callerID() int {
	if l.unlocked {
		return goroutineID()
	}
	return threadID()
}

// Logger returns the loop's logger.
func (l *Loop) Logger() *slog.Logger { return l.log }

func (l *Loop) clock() int64 { return int64(time.Since(l.epoch)) }

// Now returns the loop's cached clock reading for this iteration, a cheap
// time source for handlers (it is refreshed every iteration).
func (l *Loop) Now() time.Time { return l.epoch.Add(time.Duration(l.now)) }

// Clock returns the same reading as Now as nanoseconds on the loop's
// monotonic clock (from an arbitrary origin): cheaper than Now where only
// differences matter, such as deadlines.
func (l *Loop) Clock() int64 { return l.now }

func (l *Loop) run(ready chan<- error) {
	// The thread stays locked until the goroutine exits, so it is destroyed
	// with the loop instead of returning pinned to the scheduler's pool.
	runtime.LockOSThread()
	l.tid = threadID()
	if l.cfg.CPU >= 0 {
		if err := affinity.Pin(l.cfg.CPU); err != nil {
			ready <- fmt.Errorf("veloq: loop %d: %w", l.id, err)
			return
		}
	}
	be, name, err := newBackend(l)
	if err != nil {
		ready <- err
		return
	}
	l.be, l.backend = be, name
	if name == BackendPortable && l.cfg.CPU < 0 {
		// The portable loop waits in the Go scheduler (a channel), not in
		// a system call. A locked goroutine that parks hands its P to
		// another thread, and its wake-up hands it back: two futex
		// wake-ups and two thread switches per park (pprof of a
		// 64-connection echo: futex and the hand-offs 15% of the server's
		// CPU; 0.45-0.55 voluntary context switches per echo, 0.01-0.1
		// unlocked). Unlocked, a park is a goroutine switch; nothing else
		// needs the thread unless it is pinned.
		runtime.UnlockOSThread()
		l.unlocked = true
		l.tid = l.callerID()
	}
	ready <- nil
	if l.cfg.BlockThreshold > 0 {
		go l.watch(l.cfg.BlockThreshold)
	}
	l.loop()
	l.finish()
}

// loop is the iteration described in ARCHITECTURE.md ("The loop").
func (l *Loop) loop() {
	for {
		l.ctr.iterations++
		l.now = l.clock()
		if l.now-l.lastYield >= yieldEvery {
			l.lastYield = l.now
			runtime.Gosched() // see yieldEvery
		}
		l.more = false
		l.closes = 0
		l.runInbox()
		l.runTimers()
		l.runDeferred()
		l.flush()
		if l.stopping && l.drained() {
			return
		}
		var timeout time.Duration
		parked := false
		if !l.more && len(l.deferred) == 0 && l.inbox.Empty() {
			timeout = l.nextTimeout()
			l.state.Store(stateParking)
			switch {
			case !l.inbox.Empty() || len(l.deferred) > 0:
				l.state.Store(stateRunning)
				timeout = 0
			case !l.state.CompareAndSwap(stateParking, stateParked):
				// A poster saw PARKING and flipped us back to RUNNING.
				l.state.Store(stateRunning)
				timeout = 0
			default:
				parked = true
				l.stats.parks.Add(1)
			}
		}
		l.reports = 0
		more, err := l.be.poll(timeout)
		l.more = l.more || more
		l.ctr.completions += l.reports
		l.publish()
		if parked {
			l.state.Store(stateRunning)
		}
		if err != nil {
			l.log.Error("veloq: backend poll failed; stopping the loop", "err", err)
			l.beginStop()
		}
	}
}

// Post queues fn to run on the loop. It is safe from any goroutine and
// returns ErrClosed once the loop has stopped. Posts from one goroutine run
// in the order they were posted.
func (l *Loop) Post(fn func()) error {
	l.posting.Add(1)
	if l.closed.Load() {
		l.posting.Add(-1)
		return ErrClosed
	}
	l.inbox.Push(fn)
	l.stats.posts.Add(1)
	l.notify()
	l.posting.Add(-1)
	return nil
}

// notify is the poster's half of the park protocol.
func (l *Loop) notify() {
	for {
		switch l.state.Load() {
		case stateRunning:
			return
		case stateParking:
			if l.state.CompareAndSwap(stateParking, stateRunning) {
				return
			}
		case stateParked:
			if l.state.CompareAndSwap(stateParked, stateRunning) {
				l.stats.wakeups.Add(1)
				l.be.wake()
				return
			}
		}
	}
}

// Defer queues fn to run on the loop after the current batch of events,
// before the flush. Call it on the loop.
func (l *Loop) Defer(fn func()) { l.deferred = append(l.deferred, fn) }

// ShouldYield reports whether the current iteration has done its share
// of costly work: it has begun closing as many connections as the
// timers of one iteration may (closesPerIteration). A timer callback that works
// through a batch of its own (many deadlines served by one timer, say)
// should stop when it turns true, leave its timer due, and return: the
// loop then polls, serves other connections' input, and runs the timer
// again in the next iteration. Call it on the loop.
func (l *Loop) ShouldYield() bool { return l.closes >= closesPerIteration }

// AfterFunc runs fn on the loop after d. Call it on the loop (from another
// goroutine, Post a closure that calls it).
func (l *Loop) AfterFunc(d time.Duration, fn func()) *Timer {
	t := &Timer{when: l.clock() + int64(d), fn: fn, loop: l}
	l.timers.push(t)
	return t
}

func (l *Loop) nextTimeout() time.Duration {
	if len(l.timers) == 0 {
		return -1
	}
	d := time.Duration(l.timers[0].when - l.clock())
	if d <= 0 {
		return 0
	}
	return d
}

const maxInboxPerIteration = 1024

// closesPerIteration bounds the connections the timers of one iteration
// close. A close is the costly part of an expiry: close(2) of a TCP
// socket sends its FIN, and on loopback the peer's receive of it runs in
// the same call, about 10 µs of the loop's CPU a socket here (20-25 µs
// of wall time on a loaded machine), so the 64 closes a budget of
// expiring timers made took 1.3-2 ms of one iteration (masstimeout -n
// 19900, a per-iteration log). A quarter of that keeps an iteration of a
// mass expiry near a fifth of a millisecond, and its completions (on
// io_uring) well inside the budget of the next poll, which then has room
// for other connections' input; the timers left run in the following
// iterations, 19,900 of them in about 1,250.
const closesPerIteration = 16

// yieldEvery is how often a busy loop passes through Go's scheduler.
// The loop goroutine never blocks in Go (it waits in the kernel), so
// without this its P's scheduling tick never changes; every 10 ms the
// runtime's monitor thread (sysmon) then treats it as a goroutine that
// ran too long, preempts it and takes its P back, and each such retake
// resets sysmon to waking every 20 µs. Measured with one loop under a
// 64-connection echo load, sysmon's wake-ups took 17–27% of the server's
// CPU; yielding every 5 ms (200 scheduler round trips a second) and a
// spare P (net.Server raises GOMAXPROCS above the loop count) cut all
// threads but the loop's to 2–3%.
const yieldEvery = int64(5 * time.Millisecond)

func (l *Loop) runInbox() {
	for i := 0; i < maxInboxPerIteration; i++ {
		fn, ok := l.inbox.Pop()
		if !ok {
			if !l.inbox.Empty() {
				l.more = true // a producer is between its swap and its link
			}
			return
		}
		l.safeCall(fn, "posted func")
	}
	l.more = true
}

// runTimers runs the timers that are due, at most Config.Budget of them
// (the same bound as completions per iteration), and no more once the
// iteration has begun closing closesPerIteration connections; the rest
// run in the next iterations, which do not wait, with the I/O of other
// connections dispatched in between. Thousands of connections opened
// together reach their timeouts together: run in one iteration, their
// closes stalled every other client of the loop for the whole batch.
func (l *Loop) runTimers() {
	n := 0
	for len(l.timers) > 0 && l.timers[0].when <= l.now {
		if n == l.cfg.Budget || l.ShouldYield() {
			l.more = true
			break
		}
		n++
		t := l.timers[0]
		l.timers.remove(0)
		l.safeCall(t.fn, "timer func")
	}
	l.timerPeak = max(l.timerPeak, n)
}

func (l *Loop) runDeferred() {
	if len(l.deferred) == 0 {
		return
	}
	run := l.deferred
	l.deferred = l.deferredSpare[:0]
	for i, fn := range run {
		run[i] = nil
		l.safeCall(fn, "deferred func")
	}
	l.deferredSpare = run[:0]
}

func (l *Loop) safeCall(fn func(), what string) {
	outer := l.enterUser()
	defer func() {
		r := recover()
		if outer {
			l.leaveUser(func() string { return what })
		}
		if r != nil {
			l.logPanic(what, fmt.Sprintf("%T", fn), "", r, panicstack.Capture())
		}
	}()
	fn()
}

// enterUser marks the start of a user call; it returns false when one
// is already running (a nested call), which then leaves the marks alone.
func (l *Loop) enterUser() bool {
	if l.userSeqLoop&1 != 0 {
		return false
	}
	l.userSeqLoop++
	l.userSeq.Store(l.userSeqLoop)
	return true
}

// leaveUser marks the end of the outermost user call and, if the watchdog
// saw it block the loop, logs what it was (kind is called only then).
func (l *Loop) leaveUser(kind func() string) {
	cur := l.userSeqLoop
	l.userSeqLoop++
	l.userSeq.Store(l.userSeqLoop)
	if l.stalledSeq.Load() == cur {
		l.reportStall(kind(), time.Duration(l.clock()-l.stalledAt.Load()))
	}
}

// reportStall logs a user call that blocked the loop, at most once per
// BlockThreshold (the watchdog has counted it already).
func (l *Loop) reportStall(kind string, atLeast time.Duration) {
	now := l.clock()
	if l.lastStallLog != 0 && now-l.lastStallLog < int64(l.cfg.BlockThreshold) {
		return
	}
	l.lastStallLog = now
	l.log.Warn("veloq: a callback blocked the loop; every other connection of the loop waited",
		"callback", kind, "blocked_at_least", atLeast.Round(time.Millisecond),
		"threshold", l.cfg.BlockThreshold)
}

// onLoop reports whether the caller runs on the loop inside user code,
// the only place Conn's methods may be called. The check is one atomic
// load: outside user code the loop never calls them, so a caller that
// finds no user call running is another goroutine. A goroutine that calls
// while the loop happens to run a callback is not caught by it; race
// builds (raceBuild) add an exact check of the OS thread, which costs a
// system call. Not on an unlocked loop, where the exact check reads the
// goroutine id from a traceback of the caller's stack: on every Conn
// call that made a race build's loop so slow that a pipelined flood kept
// another client waiting 0.2-1.3 s (TestPipelinedFloodKeepsLoopFair, 1 s
// allowed); the race detector still reports the unsynchronised accesses
// such a misplaced call makes. The calls that either run on the loop or
// post themselves there, whichever goroutine calls (Dial, DialTLS,
// PacketConn.Close), must not guess: a goroutine calling while the loop
// ran a callback ran the loop's code itself, beside the loop
// (TestDialOffLoopWaitsForLoop). They ask InLoop, whose system call (or
// stack header on an unlocked loop) they are rare enough to pay.
func (l *Loop) onLoop() bool {
	if l.userSeq.Load()&1 == 0 {
		return false
	}
	return !raceBuild || l.unlocked || l.InLoop()
}

// watch is the blocked-loop watchdog: it samples userSeq every interval d
// and, when the same user call is still running one sample later (so for
// at least d), counts it in Stats.Blocked and flags it for the loop to
// report with its kind when it returns. It costs the loop nothing but the
// stores of enterUser and leaveUser.
func (l *Loop) watch(d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	var last uint64
	var seenAt int64
	flagged := false
	for {
		select {
		case <-l.stopped:
			return
		case <-t.C:
		}
		v := l.userSeq.Load()
		if v&1 == 0 || v != last {
			last, seenAt, flagged = v, l.clock(), false
			continue
		}
		if !flagged {
			flagged = true
			l.stats.blocked.Add(1)
			l.stalledAt.Store(seenAt) // before the sequence, which the loop reads first
			l.stalledSeq.Store(v)
		}
	}
}

func (l *Loop) flush() {
	l.flushPackets()
	// Indexed, not ranged: a send's report can run OnDrain callbacks that write
	// to other connections, which appends them to l.dirty; they are
	// flushed in this same pass instead of being cut off by the reset below.
	for i := 0; i < len(l.dirty); i++ {
		c := l.dirty[i]
		l.dirty[i] = nil
		c.dirty = false
		if c.state >= connTearingDown || c.connecting || c.out.len() == 0 {
			continue // torn-down output is dropped, not sent
		}
		l.be.send(c.slot)
	}
	l.dirty = l.dirty[:0]
}

// Close is part of the engine: it stops a loop made with NewLoop (a
// Server's loops stop with the Server). Listeners are closed, connections aborted with
// ErrClosed (their handlers see OnClose), in-flight kernel operations are
// cancelled, and the backend and thread are released. It waits until all
// of that has happened. For a graceful stop, close listeners and wait for
// connections first (Server.Shutdown does).
//
// It returns the error met releasing the backend (nil normally), the same
// error on every call.
func (l *Loop) Close() error {
	_ = l.Post(l.beginStop) // ErrClosed: it is stopping already
	<-l.stopped
	return l.closeErr
}

func (l *Loop) beginStop() {
	if l.stopping {
		return
	}
	l.stopping = true
	for _, ln := range l.listeners {
		if ln != nil {
			l.closeListener(ln)
		}
	}
	for i := range uint32(l.conns.len()) {
		if c := l.conns.get(i); c != nil && c.state != connClosed {
			if l.draining && c.state < connTearingDown {
				c.drain |= drainCut
			}
			l.abort(c, ErrClosed)
		}
	}
	l.closePackets()
}

// drained reports whether a stopping loop has nothing left in flight.
func (l *Loop) drained() bool {
	if l.nconn.Load() != 0 || l.udp.open != 0 {
		return false
	}
	for _, ln := range l.listeners {
		if ln != nil {
			return false
		}
	}
	// Every connection finalized only after its last completion, and every
	// listener closed only after its accept's: nothing is in flight.
	return true
}

func (l *Loop) finish() {
	l.closed.Store(true)
	for l.posting.Load() != 0 {
		runtime.Gosched()
	}
	// Run what was posted before the door closed, so posters that were
	// told "nil" are not silently dropped (their conns are closed by now).
	for {
		fn, ok := l.inbox.Pop()
		if !ok {
			if l.inbox.Empty() {
				break
			}
			runtime.Gosched()
			continue
		}
		l.safeCall(fn, "posted func")
	}
	for len(l.timers) > 0 {
		l.timers.remove(0)
	}
	l.stopHandshakes()
	l.publish()
	l.closePipes()
	if err := l.be.shutdown(); err != nil {
		l.closeErr = fmt.Errorf("veloq: loop %d: closing the %s backend: %w", l.id, l.backend, err)
	}
	close(l.stopped)
}

// publish makes the loop's own counters visible to Stats.
func (l *Loop) publish() {
	s := &l.stats
	s.bytesIn.Store(l.ctr.bytesIn)
	s.bytesOut.Store(l.ctr.bytesOut)
	s.iterations.Store(l.ctr.iterations)
	s.completions.Store(l.ctr.completions)
	s.cached.Store(l.cache.Stats().Bytes)
}

// Stats returns a snapshot of the loop's counters. Safe from any goroutine.
func (l *Loop) Stats() Stats {
	s := &l.stats
	return Stats{
		ID: l.id, Backend: l.backend, Conns: l.nconn.Load(),
		Accepted: s.accepted.Load(), Dialed: s.dialed.Load(), Closed: s.closed.Load(),
		BytesIn: s.bytesIn.Load(), BytesOut: s.bytesOut.Load(),
		Iterations: s.iterations.Load(), Parks: s.parks.Load(), Wakeups: s.wakeups.Load(),
		Posts: s.posts.Load(), Completions: s.completions.Load(), Panics: s.panics.Load(),
		Blocked:    s.blocked.Load(),
		AcceptErrs: s.acceptErrs.Load(), Spliced: s.spliced.Load(),
		InPlace: s.inPlace.Load(), HeldBufs: s.heldBufs.Load(),
		PeakConnOutput: s.outPeak.Load(), PeakConnInput: s.inPeak.Load(), CachedBytes: s.cached.Load(),
		TLSHandshakes: s.tlsHandshakes.Load(), TLSHandshakeErrors: s.tlsErrors.Load(),
		TLSHandshakeTimeouts: s.tlsTimeouts.Load(), TLSRefused: s.tlsRefused.Load(),
		Drained: s.drained.Load(), Cut: s.cut.Load(),
	}
}
