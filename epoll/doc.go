// Package epoll is a small, allocation-free wrapper around Linux epoll(7)
// (Linux only: on other systems the package is empty)
// with a built-in eventfd(2) for cross-goroutine wakeups. It is the fallback
// readiness backend of a veloq reactor where io_uring is unavailable.
//
// A [Poller] is owned by one goroutine (normally a reactor locked to its OS
// thread): [Poller.Add], [Poller.Mod], [Poller.Del], [Poller.Wait] and
// [Poller.Close] must not be called concurrently with each other. [Poller.Wake]
// is the exception: it is safe from any goroutine at any time, including
// during or after Close.
//
// Each registration carries a caller-chosen 64-bit token ([Event.Data]),
// typically an encoded connection slot and generation, which the kernel hands
// back untouched with every readiness event. One token value, [ReservedData],
// identifies the internal wakeup eventfd and cannot be registered.
//
// [Poller.Wait] blocks in epoll_pwait through a system call that hands the
// runtime's P back to the scheduler, so a parked reactor never starves other
// goroutines, even with GOMAXPROCS=1.
package epoll
