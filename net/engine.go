// The engine underneath: veloq's event loop is one goroutine locked to one OS
// thread (optionally pinned to a CPU) that owns an I/O backend (io_uring,
// or epoll where io_uring is unavailable), a connection table, timers and a
// lock-free inbox.
//
// # The loop
//
// Each iteration of Loop.run does, in order:
//
//  1. inbox: closures posted from other goroutines (Post, Conn.AsyncWrite,
//     offload results) run first;
//  2. timers that are due;
//  3. deferred tasks (Defer) queued by handlers;
//  4. flush: every connection that wrote since the last flush gets at most
//     one send submitted (io_uring) or written (epoll), so a batch of
//     pipelined responses leaves in one system call;
//  5. park and poll: when nothing is runnable the loop parks (see below)
//     and blocks in the backend until an event, a wake-up or the next timer;
//     then up to Config.Budget completions are dispatched to handlers inline.
//
// # Park and wake
//
// The loop's state is RUNNING, PARKING or PARKED. To park it stores
// PARKING, re-checks the inbox and the deferred queue, and only then moves
// PARKING→PARKED with a compare-and-swap before blocking. A poster pushes
// to the inbox first and then looks at the state: RUNNING needs nothing
// (the loop re-checks after it stores PARKING); PARKING is turned back
// into RUNNING with a CAS, which makes the loop's own CAS fail so it does
// not block; PARKED is turned into RUNNING with a CAS by exactly one poster,
// which then writes the loop's eventfd. A running loop is therefore never
// woken with a system call, and no wake-up is lost.
//
// # Ownership
//
// Only the loop's goroutine touches its backend, connection table, buffers
// and timers. Handler callbacks run on that goroutine, so Conn methods other
// than AsyncWrite, Loop().Post and the address getters must be called from
// a callback (or from a closure posted to the loop); called elsewhere, the
// ones with an error result return ErrNotOnLoop (Loop.onLoop). Conn values are never
// reused: a stale *Conn held by another goroutine sees ErrClosed, not a
// stranger's connection. Completions carry (slot, generation, op) in
// user_data, never a pointer.
//
// # The backend boundary
//
// The loop drives its backend through a few calls (open a slot, read or
// stop, send what the output queue holds, watch for readiness, close) and
// the backend reports what happened (input, end of stream, bytes sent, an
// error, the slot released, a connection accepted or connected). A backend
// knows connections only by slot, fd and output queue, and keeps its own
// per-slot record of what the kernel holds; see backend.go and
// ARCHITECTURE.md.
//
// # Memory
//
// Input arrives in the backend's read memory (a provided-buffer ring
// mmap'd outside the Go heap on io_uring, one reusable buffer on epoll)
// and is shown to the handler without copying. Only bytes the handler
// leaves unconsumed are copied into a per-connection buffer from the
// loop's bufpool cache. Output goes to a queue of pooled segments that is
// never copied to grow; a write that takes it above the high-water mark
// stops reading from that peer at once, until it drains to the low-water
// mark, so a slow reader never grows memory without bound. Freed buffers
// beyond Config.CacheBytes leave the loop's cache.
//
// # Splicing
//
// Conn.SpliceTo hands a connection's input to another connection of the
// same loop: the kernel moves the bytes socket → pipe → socket with
// splice(2), and they never enter user space. It suits large transfers
// (a proxy's bulk direction); small messages are cheaper on the ordinary
// path, which batches them. One pipe load is moved at a time: a splice
// into an empty pipe (so EAGAIN can only mean the socket is empty), then
// splices out until the pipe is empty again. Both calls are non-blocking
// and made on the loop's thread; readiness comes from an io_uring
// multishot poll on the source and a one-shot poll on a full destination,
// or from the epoll edges every connection is registered for. No kernel
// operation ever refers to a pipe, so a pipe is reused (empty) or closed
// as soon as its splice ends. Input buffered before the switch is written
// first, the peer's FIN ends the splice after the last byte and reaches
// the handler as OnEOF, and if the destination closes the source is
// aborted with ErrSpliceBroken.

package net
