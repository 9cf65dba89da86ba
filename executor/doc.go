// Package executor runs work off veloq's loop threads.
//
// It has three parts:
//
//   - [Pool], a work-stealing pool for CPU-bound tasks. Each worker owns a
//     fixed 256-slot Chase-Lev deque, a directed inbox and a fixed 256-slot
//     lock-free injection ring. Tasks submitted from outside the pool are
//     placed by power-of-two-choices on the less loaded of two random
//     workers; tasks a worker creates for itself go onto its own deque (see
//     [Worker.Spawn]); idle workers steal half of a victim's queue (unless
//     [WithStealing](false) turns stealing off); a worker with nothing to
//     do parks, and a spawner wakes one only when it sees a parked worker
//     and no thief already spinning. A spawner that outruns the workers
//     yields its processor to them rather than let the queues grow (see
//     [Pool.Spawn]).
//   - [BlockingPool], an elastic pool for blocking calls: 0 to a bound of
//     goroutines, idle ones exit after a timeout, and a bounded queue that
//     rejects with [ErrOverloaded] when full (load shedding).
//   - [Future], the result of a function run on either pool, with a lock-free
//     state word. Plain goroutines [Future.Wait]; code pinned to a reactor asks
//     for a continuation on its own thread with [Future.OnLoop].
//
// Most code does not call this package directly: a connection's handler
// offloads with the helpers that keep its answers in order and bring the
// result back to its loop. For TCP, vnet.Offload (a task on a [Pool]) and
// vnet.OffloadBlocking (on a [BlockingPool]), in package
// github.com/veloq/veloq/net; for HTTP, vhttp.Offloaded and
// vhttp.OffloadedBlocking wrap a handler, and vhttp.WithStdPool and
// vhttp.WithStdBlockingPool place FromStd handlers, in package
// github.com/veloq/veloq/http.
//
// A panic in a task never takes a worker down: it is recovered, logged with
// log/slog and counted, and for a [Future] it becomes the future's error,
// a *[PanicError] that matches [ErrPanicked] with errors.Is.
//
// # Why Spawn cannot tell it is running on a worker
//
// Go has no goroutine-local storage, and the one way to learn the current
// goroutine's identity (parsing runtime.Stack) costs microseconds, more than
// the whole Spawn path. So [Pool.Spawn] always places by power-of-two-choices.
// Code that runs on a worker and wants the cheap, cache-friendly path gets its
// [*Worker] explicitly: [Pool.Go] hands it to the task, [WorkerFrom] pulls it
// out of the context given to a [Submit] function, and [Worker.Spawn] pushes
// onto that worker's own deque.
//
// The state machines (the worker park protocol in worker.go, the future
// state in future.go, the deque indices in deque.go) are described once, next
// to the code that owns them.
package executor
