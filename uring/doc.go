// Package uring is a small pure-Go binding to Linux io_uring (Linux only:
// on other systems the package is empty), shaped like
// liburing: Setup maps the submission queue (SQ), completion queue (CQ) and
// SQE array; GetSQE hands out an SQE; one Prep* method per opcode fills it;
// Submit/SubmitAndWait/SubmitAndWaitTimeout publish it; PeekCQE,
// PeekBatchCQE and WaitCQE read completions in place and CQAdvance/CQESeen
// give their slots back. There is no cgo and no hidden allocation on the
// submit and peek paths.
//
// # Threading
//
// A Ring is owned by one goroutine. With WithSingleIssuer or
// WithDeferTaskrun the kernel also ties the ring to one OS thread: lock it
// with runtime.LockOSThread before Setup and use the ring only from there
// (io_uring_enter from another thread fails with EEXIST). RegisterRingFd is
// per thread too.
//
// # Memory rules
//
// The kernel reads and writes memory by raw address long after the Prep*
// call returns, and the Go garbage collector and stack mover know nothing
// about that. Therefore:
//
//   - user_data never carries a Go pointer. Encode an index, a generation
//     and an operation tag into the 64 bits instead (the GC does not see
//     pointers hidden in integers and would free or reuse the object).
//   - A buffer, iovec array, msghdr, sockaddr or timespec handed to the
//     kernel stays referenced by the caller until the request's final CQE
//     has been reaped (for SendZC: until the CQEFNotif CQE; for multishot
//     requests: until a CQE without CQEFMore).
//   - Such memory is never on a goroutine stack: goroutine stacks move when
//     they grow, and the kernel would keep writing to the old address. Use
//     heap memory that a long-lived object references, or mmap'd memory
//     (as the provided buffer rings and the reactor's buffer pool do).
//
// The rings themselves are mmap'd shared memory. The package reads the
// kernel-written head/tail words and flags with sync/atomic loads and
// publishes its own head/tail with sync/atomic stores, which gives the
// acquire/release ordering the io_uring ABI requires.
//
// # Completion flushing
//
// When the CQ is full the kernel (FEAT_NODROP) parks completions in an
// overflow list and sets IORING_SQ_CQ_OVERFLOW; with COOP/DEFER_TASKRUN
// completions may wait as task work, flagged by IORING_SQ_TASKRUN. Submit,
// PeekCQE and PeekBatchCQE check those flags and enter the kernel with
// GETEVENTS to flush, so no completion is lost as long as the caller keeps
// reaping.
package uring
