package net

import (
	"fmt"
	"time"

	"github.com/veloq/veloq/internal/sock"
)

// The boundary between a loop and its I/O backend runs one way at a time:
// the loop asks the backend to do things (backend), and the backend reports
// what happened (sink). A backend knows connections only by their slot in
// the loop's table, the fd the loop gave it and the output queue it reads
// from; it keeps its own per-slot record of the operations it has in the
// kernel and never touches a Conn. The loop, in turn, never sees a
// completion, an epoll event or a buffer-ring index except through a
// report. This is the shape of Go's runtime/netpoll.go platform contract:
// a few calls in, readiness (here: results) out.
//
// Both directions run on the loop's goroutine, except wake.

// backend is the I/O half of a loop.
type backend interface {
	// poll submits pending work, waits up to timeout (0: not at all, <0:
	// until something happens) and reports up to Config.Budget events to
	// the sink. more says it left events for the next call.
	poll(timeout time.Duration) (more bool, err error)
	// wake interrupts a blocked poll. Safe from any goroutine.
	wake()

	// listen starts (or, after an accept failure, restarts) accepting on
	// listener idx; each connection is reported with accepted.
	listen(idx uint32, fd int) error
	// unlisten stops accepting; listenerClosed reports when the kernel
	// holds no accept for it. The loop closes the fd then.
	unlisten(idx uint32)

	// open registers connection slot (socket fd, output queue q). With a
	// non-nil dial it first connects to dial and reports connected. No
	// input is read until setReading(slot, true).
	open(slot uint32, fd int, q *outQueue, dial sockaddr) error
	// setReading starts or stops receiving input for slot. Stopping is
	// prompt: at most the input the kernel had already delivered before
	// the call is still reported.
	setReading(slot uint32, on bool)
	// pace says slot's input is held back by its handler (PauseRead,
	// output above the high-water mark, or a ForwardTo whose destination
	// is behind): whatever is received ahead of the handler waits in the
	// connection's heap input, so from now on the backend receives at
	// most one buffer ahead of it (io_uring: no more multishot receives
	// for slot).
	pace(slot uint32)
	// send asks the backend to send what q holds; progress is reported
	// with sent (or failed). A call while a send is in flight is a no-op:
	// the backend goes on with the queue after the completion's report.
	send(slot uint32)
	// watch asks for (on) or withdraws (off) readiness reports for slot's
	// input (out false) or output (out true), for splicing. An input watch
	// begins only once a receive stopped by setReading has ended, so no
	// input is reported after the first ready.
	watch(slot uint32, out, on bool)
	// recycle returns receive buffer bid, kept by the loop from an input
	// report (in-place forwarding), to the backend.
	recycle(bid uint16)
	// close stops every operation of slot; released reports when the
	// kernel holds nothing of it any more and the fd is closed. Native
	// backends close the fd in the next poll, after the iteration's
	// output went out (closeQueue).
	close(slot uint32)
	// shutdown releases the backend. The loop calls it last.
	shutdown() error

	// Datagram sockets (udp_backend.go): the backend reports readiness
	// and the loop does the batched I/O itself.
	packetBackend
}

// sink receives a backend's reports; the loop is the only implementation.
// A report may re-enter the backend (a handler writes, closes, pauses).
type sink interface {
	// accepted: listener idx accepted fd, now the loop's; peer is the
	// address the accept reported, or none where it reports none (the
	// loop asks the kernel then).
	accepted(idx uint32, fd int, peer sock.Peer)
	// acceptFailed: listener idx failed to accept. retry false means the
	// error is transient and accepting goes on; true means the loop backs
	// off and will call listen again, so the backend stops accepting.
	acceptFailed(idx uint32, err error) (backOff bool)
	// listenerClosed: the kernel holds no accept for listener idx.
	listenerClosed(idx uint32)
	// connected: an outbound connect finished (err nil) or failed.
	connected(slot uint32, err error)
	// input: b arrived for slot. bid >= 0 names the receive buffer b lies
	// in; kept true means the loop keeps that buffer (it calls recycle
	// later). b is only valid during the call otherwise.
	input(slot uint32, b []byte, bid int32) (kept bool)
	// eof: the peer sent FIN; no more input follows.
	eof(slot uint32)
	// sent: n bytes at the head of the output queue reached the kernel.
	sent(slot uint32, n int)
	// failed: an I/O error on slot; the connection cannot go on.
	failed(slot uint32, err error)
	// ready: slot's input (out false) or output (out true) is ready, for a
	// watch.
	ready(slot uint32, out bool)
	// released: the kernel holds nothing of slot; its fd is closed.
	released(slot uint32)

	packetSink
}

// maxAccepts bounds the connections a listener accepts in one go, so a
// flood of them does not hold the loop: the rest are taken on the next
// poll.
const maxAccepts = 64

// maxReadsOnce bounds the reads of one connection's input in one go
// (epoll, and the portable backend on unix), for the same reason: the
// rest is read on the next poll.
const maxReadsOnce = 8

// closeQueue holds the slots whose sockets a native backend has still to
// close, in order. poll closes them after the iteration's flush has
// handed its output to the kernel (written on epoll; on io_uring queued
// ahead of the closes in the submission queue) and before it waits for
// events: the answers to input that came before are out before the
// closes, and input that comes during them is read right after. Closed
// among the timers (epoll) or the completions (io_uring), a budget of
// closes ran between a request's dispatch and the flush of its answer.
// How many there are per iteration is bounded where closes start (the
// timers stop at closesPerIteration; the reports of a poll are a budget
// of events), and poll closes all of them, so a busy loop never holds
// on to the descriptors of connections it closed.
type closeQueue []uint32

func (q *closeQueue) push(slot uint32) { *q = append(*q, slot) }

// run calls closeFn for every queued slot, in order, including those
// queued meanwhile (a released report runs OnClose, which may close
// other connections), and reports whether there were any.
func (q *closeQueue) run(closeFn func(slot uint32)) bool {
	for i := 0; i < len(*q); i++ {
		closeFn((*q)[i])
	}
	ran := len(*q) > 0
	*q = (*q)[:0]
	return ran
}

// Completion user_data / epoll token layout: op in the top 8 bits, a
// generation in the next 24, the slot in the low 32. No pointer is ever
// stored, so the kernel never holds a Go pointer.
const (
	opWake uint64 = iota + 1
	opAccept
	opRecv
	opSend
	opConnect
	opCancel
	opPollIn  // io_uring: multishot POLLIN for an input watch
	opPollOut // io_uring: one-shot POLLOUT for an output watch
	opPktIn   // datagram socket input readiness (udp_backend.go)
	opPktOut  // datagram socket output readiness
	opClose   // io_uring: a connection's close (closeQueue)
)

func token(op uint64, slot, gen uint32) uint64 {
	return op<<56 | uint64(gen&0xffffff)<<32 | uint64(slot)
}

func untoken(t uint64) (op uint64, slot, gen uint32) {
	return t >> 56, uint32(t), uint32(t>>32) & 0xffffff
}

func newBackend(l *Loop) (backend, Backend, error) {
	if l.cfg.Backend == BackendPortable {
		b, err := newPortableBackend(&l.cfg, l)
		if err != nil {
			return nil, "", fmt.Errorf("veloq: loop %d: portable backend: %w", l.id, err)
		}
		return b, BackendPortable, nil
	}
	return newNativeBackend(l) // backend_linux.go, backend_other.go
}
