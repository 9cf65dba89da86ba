package reactor

import (
	"fmt"
	"sync"
	"time"

	"github.com/veloq/veloq/internal/sock"
)

// backend is the I/O half of a loop. Every method runs on the loop's
// goroutine except wake.
type backend interface {
	// poll submits pending work, waits up to timeout (0: not at all, <0:
	// until something happens) and dispatches up to Budget events; it sets
	// l.more when it left events for the next iteration.
	poll(timeout time.Duration) error
	// wake interrupts a blocked poll. Safe from any goroutine.
	wake()
	addListener(ln *listener) error
	// closeListener stops accepting; it calls l.listenerClosed when done.
	closeListener(ln *listener)
	// addConn starts reading an accepted connection.
	addConn(c *Conn) error
	// connect starts an outbound connect; l.connected reports the outcome.
	connect(c *Conn, a sock.Addr) error
	// startRead starts reading a connection whose connect completed.
	startRead(c *Conn) error
	// flush starts sending c's pending output.
	flush(c *Conn)
	pauseRead(c *Conn)
	resumeRead(c *Conn)
	// readStopped reports whether no receive of c's is in flight after
	// pauseRead (io_uring: the cancelled multishot recv has completed).
	readStopped(c *Conn) bool
	// recycle returns io_uring provided buffer bid, kept by ForwardTo and
	// now sent or dropped, to the buffer ring (epoll never keeps one).
	recycle(bid uint16)
	// spliceArm starts readiness reports for s.src (l.pump on input).
	spliceArm(s *splice)
	// spliceWaitOut asks for l.pump once s.dst is writable again.
	spliceWaitOut(s *splice)
	// spliceStop withdraws s's readiness requests.
	spliceStop(s *splice)
	// closeConn stops all I/O on c and calls l.finalize once the kernel
	// holds nothing of it.
	closeConn(c *Conn)
	close() error
}

// Completion user_data / epoll token layout: op in the top 8 bits, the
// slot's generation in the next 24, the slot in the low 32. No pointer is
// ever stored, so the kernel never holds a Go pointer.
const (
	opWake uint64 = iota + 1
	opAccept
	opRecv
	opSend
	opConnect
	opCancel
	opSplicePoll // io_uring: multishot POLLIN on a splice's source
	opSpliceOut  // io_uring: one-shot POLLOUT on a splice's destination
)

func token(op uint64, slot, gen uint32) uint64 {
	return op<<56 | uint64(gen&0xffffff)<<32 | uint64(slot)
}

func untoken(t uint64) (op uint64, slot, gen uint32) {
	return t >> 56, uint32(t), uint32(t>>32) & 0xffffff
}

func (c *Conn) token(op uint64) uint64 { return token(op, c.slot, c.gen) }

// uringProbe caches the io_uring probe: the answer does not change while the
// process runs, and "auto" must log its fallback reason only once.
var uringProbe struct {
	once sync.Once
	err  error
}

// ProbeUring reports whether this process can run the io_uring backend,
// and if not, why (the error names the cause: old kernel, seccomp, memlock).
func ProbeUring() error {
	uringProbe.once.Do(func() { uringProbe.err = probeUring() })
	return uringProbe.err
}

func newBackend(l *Loop) (backend, Backend, error) {
	switch l.cfg.Backend {
	case BackendUring:
		b, err := newUringBackend(l)
		if err != nil {
			return nil, "", fmt.Errorf("reactor: loop %d: io_uring backend: %w", l.id, err)
		}
		return b, BackendUring, nil
	case BackendEpoll:
		b, err := newEpollBackend(l)
		if err != nil {
			return nil, "", fmt.Errorf("reactor: loop %d: epoll backend: %w", l.id, err)
		}
		return b, BackendEpoll, nil
	}
	if err := ProbeUring(); err == nil {
		if b, err := newUringBackend(l); err == nil {
			return b, BackendUring, nil
		} else {
			l.log.Warn("veloq: io_uring setup failed; using epoll", "reason", err)
		}
	}
	b, err := newEpollBackend(l)
	if err != nil {
		return nil, "", fmt.Errorf("reactor: loop %d: epoll backend: %w", l.id, err)
	}
	return b, BackendEpoll, nil
}
