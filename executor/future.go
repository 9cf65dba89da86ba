package executor

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
)

// Poster runs posted functions on one goroutine, such as a veloq loop's
// thread; *vnet.Loop (package github.com/veloq/veloq/net) satisfies it.
// It is named for its one method, as io.Reader is: it is not a loop of
// this package's own.
type Poster interface {
	// Post arranges for fn to run on the loop's goroutine. It returns an
	// error if the loop no longer accepts work.
	Post(fn func()) error
}

// Future is the result of a function run on a pool. Its result is published
// once; all methods are safe for concurrent use.
type Future[T any] struct {
	// state is the future's state machine:
	//
	//	futPending ──CAS by the one completer──▶ futCompleting ──store──▶ futDone
	//
	// Completion can race between the task finishing, the submit context
	// being cancelled (context.AfterFunc), and a failed submission; the CAS
	// picks exactly one completer. Only the completer writes val and err,
	// and only between its CAS and its store of futDone, so a reader that
	// loads futDone reads them without a lock.
	state atomic.Uint32

	val T
	err error

	// done is the lazily made channel returned by Done; closed says it has
	// been closed. Both the completer (after futDone) and Done (after
	// installing a channel) try to close it; closed's CAS lets one do so.
	done   atomic.Pointer[chan struct{}]
	closed atomic.Bool

	// conts is a lock-free stack of OnLoop continuations. The completer
	// drains it and then installs &sealed, after which OnLoop posts
	// directly.
	conts  atomic.Pointer[cont[T]]
	sealed cont[T]

	// Owned by the submitter until the task runs, then by the task.
	fn   func(context.Context) (T, error)
	ctx  context.Context
	stop func() bool // unregisters the cancellation AfterFunc
	wctx workerCtx
	log  *slog.Logger
}

const (
	futPending uint32 = iota
	futCompleting
	futDone
)

type cont[T any] struct {
	loop Poster
	fn   func(T, error)
	next *cont[T]
}

// Submit runs fn on the stealable pool p and returns its future. fn receives
// a context derived from ctx from which WorkerFrom recovers the worker that
// runs it.
//
// If ctx is done before fn starts, fn is not run and the future completes
// with ctx.Err() at once. If p is shut down, the future completes with
// ErrClosed. A panic in fn becomes a *PanicError.
func Submit[T any](ctx context.Context, p *Pool, fn func(context.Context) (T, error)) *Future[T] {
	f := newFuture(ctx, fn, p.log)
	if f.isDone() {
		return f
	}
	if err := p.inject(wtaskOf(f.runOn)); err != nil {
		f.fail(err)
	}
	return f
}

// SubmitBlocking runs fn on the blocking pool b and returns its future. If b
// is full the future completes with ErrOverloaded; if b is shut down, with
// ErrClosed. Otherwise it behaves as Submit.
func SubmitBlocking[T any](ctx context.Context, b *BlockingPool, fn func(context.Context) (T, error)) *Future[T] {
	f := newFuture(ctx, fn, b.log)
	if f.isDone() {
		return f
	}
	if err := b.Spawn(f.run); err != nil {
		f.fail(err)
	}
	return f
}

func newFuture[T any](ctx context.Context, fn func(context.Context) (T, error), log *slog.Logger) *Future[T] {
	f := &Future[T]{fn: fn, ctx: ctx, log: log}
	switch {
	case fn == nil:
		f.fail(ErrNilTask)
	case ctx.Err() != nil:
		f.fail(ctx.Err())
	case ctx.Done() != nil:
		f.stop = context.AfterFunc(ctx, func() { f.fail(ctx.Err()) })
	}
	return f
}

// fail completes f with err unless it is already complete.
func (f *Future[T]) fail(err error) {
	var zero T
	f.complete(zero, err)
}

// runOn is the pool task: it runs fn with a context that carries w.
func (f *Future[T]) runOn(w *Worker) {
	f.wctx = workerCtx{Context: f.ctx, w: w}
	w.curCtx.Store(&f.wctx)
	v, done, err := f.call(&f.wctx)
	// Leave the worker's scope before completing: whoever the completion
	// wakes may test a context it kept from fn with WorkerFrom at once.
	w.curCtx.Store(nil)
	if done {
		f.complete(v, err)
	}
}

// run is the blocking-pool task. Its context hides any worker that ctx
// carries (a Submit function may pass its own context to SubmitBlocking):
// the blocking goroutine must not think it owns that worker's deque.
func (f *Future[T]) run() {
	f.wctx = workerCtx{Context: f.ctx}
	if v, done, err := f.call(&f.wctx); done {
		f.complete(v, err)
	}
}

// call runs fn and returns what f is to be completed with; done is false if
// f was completed while queued (cancelled), and then fn does not run.
func (f *Future[T]) call(ctx context.Context) (v T, done bool, err error) {
	if f.state.Load() != futPending {
		f.fn = nil
		return v, false, nil // cancelled while queued
	}
	if f.stop != nil {
		f.stop()
	}
	if err := f.ctx.Err(); err != nil {
		return v, true, err
	}
	v, err = f.protect(ctx)
	f.fn = nil // the task owns fn; drop what it captured
	return v, true, err
}

// protect calls fn, turning a panic into a *PanicError.
func (f *Future[T]) protect(ctx context.Context) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return f.fn(ctx)
}

// complete publishes the result if f is still pending, then wakes waiters
// and posts continuations. It reports whether it was the completer.
func (f *Future[T]) complete(v T, err error) bool {
	if !f.state.CompareAndSwap(futPending, futCompleting) {
		return false
	}
	f.val, f.err = v, err
	f.state.Store(futDone)
	if ch := f.done.Load(); ch != nil && f.closed.CompareAndSwap(false, true) {
		close(*ch)
	}
	// Post the continuations in the order they were registered: take the
	// stack, post it oldest first, and repeat until it is empty; only then
	// seal it. An OnLoop that finds it sealed posts directly, and does so
	// after everything registered before it.
	for {
		head := f.conts.Load()
		if head == nil {
			if f.conts.CompareAndSwap(nil, &f.sealed) {
				break
			}
			continue
		}
		if !f.conts.CompareAndSwap(head, nil) {
			continue
		}
		var list *cont[T]
		for c := head; c != nil; {
			next := c.next
			c.next = list
			list, c = c, next
		}
		for c := list; c != nil; c = c.next {
			f.post(c.loop, c.fn)
		}
	}
	return true
}

func (f *Future[T]) isDone() bool { return f.state.Load() == futDone }

// Wait blocks until f is complete or ctx is done. In the latter case it
// returns ctx.Err(); the task itself is not affected (cancel the context
// given to Submit for that).
func (f *Future[T]) Wait(ctx context.Context) (T, error) {
	if f.isDone() {
		return f.val, f.err
	}
	select {
	case <-f.Done():
		return f.val, f.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// TryGet returns the result without blocking; ok is false while f is
// pending, and then v and err are zero.
func (f *Future[T]) TryGet() (v T, ok bool, err error) {
	if f.isDone() {
		return f.val, true, f.err
	}
	return v, false, nil
}

// Done returns a channel that is closed when f is complete. The channel is
// made on first use.
func (f *Future[T]) Done() <-chan struct{} {
	if ch := f.done.Load(); ch != nil {
		return *ch
	}
	ch := make(chan struct{})
	if !f.done.CompareAndSwap(nil, &ch) {
		return *f.done.Load()
	}
	// The completer may have finished before our channel was installed.
	if f.isDone() && f.closed.CompareAndSwap(false, true) {
		close(ch)
	}
	return ch
}

// OnLoop arranges for fn to run on l (through l.Post) once f is complete,
// or right away if it already is. Continuations are posted in the order they
// were registered. If l refuses the post (a closed loop), fn is not called
// and the refusal is logged.
func (f *Future[T]) OnLoop(l Poster, fn func(T, error)) {
	c := &cont[T]{loop: l, fn: fn}
	for {
		head := f.conts.Load()
		if head == &f.sealed {
			f.post(l, fn)
			return
		}
		c.next = head
		if f.conts.CompareAndSwap(head, c) {
			return
		}
	}
}

func (f *Future[T]) post(l Poster, fn func(T, error)) {
	v, err := f.val, f.err
	if perr := l.Post(func() { fn(v, err) }); perr != nil && f.log != nil {
		f.log.Error("executor: future continuation dropped", "err", perr)
	}
}

// workerCtx is the context given to a Submit function: the caller's
// context plus the worker that runs the function. It lives inside the
// Future, so it costs no allocation.
type workerCtx struct {
	context.Context
	w *Worker
}

type workerKey struct{}

func (c *workerCtx) Value(key any) any {
	if key == (workerKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// WorkerFrom returns the worker running the Submit function that received
// ctx, or nil if ctx did not come from Submit or that function has
// returned. The worker may be used only on that function's goroutine and
// until it returns (see Worker); WorkerFrom cannot detect a context handed
// to another goroutine while the function still runs.
func WorkerFrom(ctx context.Context) *Worker {
	c, _ := ctx.Value(workerKey{}).(*workerCtx)
	if c == nil || c.w == nil || c.w.curCtx.Load() != c {
		return nil
	}
	return c.w
}
