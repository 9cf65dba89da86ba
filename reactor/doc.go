// Package reactor is veloq's event loop: one goroutine locked to one OS
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
// a callback (or from a closure posted to the loop). Conn values are never
// reused: a stale *Conn held by another goroutine sees ErrClosed, not a
// stranger's connection. Completions carry (slot, generation, op) in
// user_data, never a pointer.
//
// # Memory
//
// Input arrives in the loop's read memory (a provided-buffer ring mmap'd
// outside the Go heap on io_uring, one reusable buffer on epoll) and is
// shown to the handler without copying. Only bytes the handler leaves
// unconsumed are copied into a per-connection buffer from the loop's
// bufpool cache. Output is appended to a per-connection buffer; when it
// passes the high-water mark the loop stops reading from that peer until it
// drains below the low-water mark, so a slow reader never grows memory
// without bound.
package reactor
