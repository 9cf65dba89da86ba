package net

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// ErrCannotSplice is wrapped by SpliceTo when the two connections cannot be
// spliced (different loops, a connection already splicing, a destination
// that is still connecting or has shut its write side, no pipe available).
// The caller can go on forwarding by copy.
var ErrCannotSplice = errors.New("veloq: cannot splice")

// ErrSpliceBroken closes a connection whose splice destination closed
// first: the bytes read from it had nowhere to go.
var ErrSpliceBroken = errors.New("veloq: splice destination closed")

// spliceRounds bounds the pipe loads one pump moves before it lets the rest
// of the loop run (16 × the pipe size, 4 MiB with 256 KiB pipes).
const spliceRounds = 16

// splicePipeSize is the capacity asked of every splice pipe with
// F_SETPIPE_SZ. A pipe holds page references, not copies; a bigger one
// moves more per system call. If the kernel refuses (per-user pipe limits),
// the pipe keeps its default size.
const splicePipeSize = 256 << 10

// The pool of empty pipes saves a pipe2 and an fcntl per splice when
// spliced connections come and go in bursts. But an idle pipe holds two
// descriptors that count against RLIMIT_NOFILE, which a process short of
// them needs for sockets, and that a descriptor-leak check sees after the
// traffic. So a loop keeps at most 64 pipes and at most 1/32 of the soft
// limit in descriptors (4 pipes at ulimit -n 300: two loops' pools take
// 5% of it, not 256 descriptors), and closes a pipe that stays unused for
// pipeIdle: a burst reuses its pipes within milliseconds, and a second
// after the traffic stops the process is back to its own descriptors.
const (
	maxPooledPipes = 64
	pipeFDShare    = 32
	pipeIdle       = time.Second
)

// spipe is a pipe owned by the loop: r and w are its read and write ends.
type spipe struct {
	r, w   int
	size   int   // capacity in bytes
	pooled int64 // loop clock when it went into the pool
}

// loopSplice is a loop's splice state.
type loopSplice struct {
	pipes []spipe // empty pipes kept for reuse, oldest first
	trim  *Timer  // closes the pipes idle for pipeIdle (trimPipes)
}

// splice moves src's input to dst through a pipe, one pipe load at a time:
// splice(src → pipe) only into an empty pipe (so EAGAIN unambiguously
// means "src has nothing"), then splice(pipe → dst) until the pipe is
// empty again. Both calls are non-blocking splice(2) system calls made on
// the loop's thread; readiness comes from the backend (an io_uring
// multishot POLLIN on src and a one-shot POLLOUT on dst, or the epoll
// edges the connections are registered for). The kernel therefore never
// holds an operation that refers to the pipe, and the pipe can be
// recycled or closed the moment the splice ends.
type splice struct {
	src, dst  *Conn
	pipe      spipe
	queued    int  // bytes in the pipe
	started   bool // the backend reported src ready: its ordinary receive is over
	waitOut   bool // dst's socket is full: waiting for it to be writable
	waitDrain bool // dst has ordinary output to send before spliced bytes
	again     bool // a continuation of the pump is deferred
	ended     bool
}

// SpliceTo hands c's input to dst from now on: the kernel moves the bytes
// from c's socket to dst's socket through a pipe, without copying them
// into user space, and c's OnData no longer runs. Input c has already
// buffered (held by HoldData or PauseRead, or left unconsumed) is written
// to dst first, so the byte order is kept. It is meant for large
// transfers: every pipe load costs two system calls, which a receive into
// the loop's buffers and a batched send do not.
//
// When c's peer sends EOF, the splice ends after every byte before it has
// reached dst's socket, and c's handler gets OnEOF as usual (a proxy calls
// dst.CloseWrite there). A read error aborts c, a write error aborts dst,
// and if dst closes while the splice runs, c is aborted with
// ErrSpliceBroken. Closing c ends the splice; bytes already read from c
// but not yet written to dst are dropped. PauseRead on c stops the splice
// until ResumeRead. Writes made to dst while the splice runs are sent
// between pipe loads. Both connections must belong to the same loop, and
// dst may be the destination of one splice at a time. Both backends
// support it; on io_uring, readiness comes from poll requests (see
// ARCHITECTURE.md for why not IORING_OP_SPLICE).
//
// SpliceTo returns ErrClosed if either connection is closing, and an
// error wrapping ErrCannotSplice if the pair cannot be spliced, including
// when no new pipe can be had (pipe2 fails, or half the descriptor table
// is in use and the rest is kept for sockets): nothing has changed then.
// Buffered input is still buffered, PauseRead and HoldData still hold,
// and the caller can go on forwarding by copy (lift its hold, and copy in
// OnData).
func (c *Conn) SpliceTo(dst *Conn) error {
	if err := c.spliceRefusal(dst); err != nil {
		return err
	}
	l := c.loop
	// The pipe comes first: it is the one step that can fail for want of
	// a resource, and the steps after it change the connection's state.
	var p spipe
	if !c.eof {
		var err error
		if p, err = l.getPipe(); err != nil {
			return fmt.Errorf("%w: %w", ErrCannotSplice, err)
		}
	}
	if err := c.spliceBuffered(dst); err != nil {
		if !c.eof {
			l.putPipe(p, true)
		}
		return err
	}
	if c.eof {
		// The peer's FIN is already here: nothing is left to splice. A FIN
		// kept during a hold is delivered now, after the input above.
		if c.eofPending {
			c.eofPending = false
			l.Defer(func() {
				if c.state == connOpen {
					l.deliverEOF(c)
				}
			})
		}
		return nil
	}
	s := &splice{src: c, dst: dst, pipe: p}
	c.more().spliceSrc, dst.more().spliceDst = s, s
	// Ordinary reading stops for good (holdSplice is never lifted), and
	// the backend reports src ready only once its receive is over: input
	// that receive still delivers is copied to dst (spliceInput), so no
	// byte overtakes another.
	l.setHold(c, holdSplice)
	l.be.watch(c.slot, false, true)
	return nil
}

// spliceRefusal returns why c cannot splice into dst, or nil.
func (c *Conn) spliceRefusal(dst *Conn) error {
	switch {
	case c.offLoop():
		return ErrNotOnLoop
	case c.state != connOpen || dst == nil || dst.state != connOpen:
		return ErrClosed
	case dst.loop != c.loop:
		return fmt.Errorf("%w: the connections belong to different loops", ErrCannotSplice)
	case c.loop.backend == BackendPortable:
		return fmt.Errorf("%w: the portable backend has no splice (it needs the epoll or io_uring backend on Linux; use ForwardTo)", ErrCannotSplice)
	case dst == c:
		return fmt.Errorf("%w: a connection cannot splice into itself", ErrCannotSplice)
	case c.spliceSrc() != nil:
		return fmt.Errorf("%w: the source is already splicing", ErrCannotSplice)
	case dst.spliceDst() != nil:
		return fmt.Errorf("%w: the destination already receives a splice", ErrCannotSplice)
	case c.connecting || dst.connecting:
		return fmt.Errorf("%w: a connection is still connecting", ErrCannotSplice)
	case dst.wrShut:
		return fmt.Errorf("%w: the destination's write side is shut", ErrCannotSplice)
	case dst.SendingFile():
		return fmt.Errorf("%w: the destination is sending a file", ErrCannotSplice)
	case c.tlsLayer() != nil || dst.tlsLayer() != nil:
		// The kernel would move ciphertext where plaintext is meant.
		return fmt.Errorf("%w: a TLS connection (use ForwardTo, which copies plaintext)", ErrCannotSplice)
	}
	return nil
}

// spliceBuffered writes the input c has buffered to dst, then drops it and
// lifts the holds that kept it, for the splice to take over.
func (c *Conn) spliceBuffered(dst *Conn) error {
	// Inside OnData, view holds the unconsumed rest of the current chunk
	// (a window of in when owned, with the rest of in behind it);
	// elsewhere the buffered input is in.
	pending, tail := c.view, []byte(nil)
	switch {
	case c.viewOwned && c.view != nil:
		// present shows the buffered input a window at a time, in[off:end],
		// and consuming only advances the view's start, so its end in in is
		// where its capacity, counted from in's, says.
		tail = c.in[cap(c.in)-cap(c.view)+len(c.view):]
	case c.view == nil:
		pending = c.in
	}
	if len(pending)+len(tail) > 0 {
		if _, err := dst.writev([][]byte{pending, tail}); err != nil {
			return err
		}
		c.more().spliced += int64(len(pending) + len(tail))
	}
	c.view = nil
	c.loop.dropInput(c)
	c.hold &^= holdUser | holdData | holdReplay
	return nil
}

// SplicedBytes returns how many of c's input bytes SpliceTo has passed to
// a destination over the connection's life: the bytes the kernel spliced,
// plus those buffered or still being received when the splice began,
// which it wrote by copy. With what the handler forwarded itself, it
// accounts for every byte.
func (c *Conn) SplicedBytes() int64 {
	if c.aux == nil {
		return 0
	}
	return c.aux.spliced
}

// spliceInput takes a chunk that c's recv delivered after SpliceTo (io_uring,
// before the cancel took effect) and writes it to the destination.
func (l *Loop) spliceInput(c *Conn, chunk []byte) {
	if _, err := c.spliceSrc().dst.write(chunk); err != nil {
		l.abort(c, ErrSpliceBroken)
		return
	}
	c.more().spliced += int64(len(chunk))
}

func (l *Loop) deferPump(s *splice) {
	if s.again || s.ended {
		return
	}
	s.again = true
	l.Defer(func() {
		s.again = false
		l.pump(s)
	})
}

// pump moves data from src to dst until src has nothing, dst is full, or
// the round budget is spent. See the splice type for the protocol.
func (l *Loop) pump(s *splice) {
	src, dst := s.src, s.dst
	for round := 0; !s.ended && s.started; {
		if src.state != connOpen || dst.state != connOpen {
			return // a Close is under way; teardown ends the splice
		}
		if s.queued > 0 {
			if s.waitOut {
				return // the backend calls back when dst is writable
			}
			if dst.out.len() > 0 {
				s.waitDrain = true // afterWrite calls back at zero
				return
			}
			n, err := spliceNB(s.pipe.r, dst.fd, s.queued)
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				s.waitOut = true
				l.be.watch(dst.slot, true, true)
				return
			case err != nil:
				l.abort(dst, os.NewSyscallError("splice", err))
				return
			}
			s.queued -= int(n)
			src.more().spliced += n
			dst.lastActive = l.now
			l.ctr.bytesOut += uint64(n)
			l.stats.spliced.Add(uint64(n))
			continue
		}
		if src.hold&holdUser != 0 {
			return // PauseRead: ResumeRead restarts the pump
		}
		if round == spliceRounds {
			l.deferPump(s) // let the loop's other connections run
			return
		}
		round++
		n, err := spliceNB(src.fd, s.pipe.w, s.pipe.size)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return // the pipe is empty, so src is: wait for readiness
		case err != nil:
			l.abort(src, os.NewSyscallError("splice", err))
			return
		case n == 0:
			// FIN, and every byte before it has reached dst's socket.
			l.endSplice(s)
			l.onEOF(src)
			return
		}
		s.queued = int(n)
		src.lastActive = l.now
		l.ctr.bytesIn += uint64(n)
	}
}

// endSplice stops s: readiness requests are cancelled, the pipe goes back
// to the loop's pool if it is empty (else it is closed, dropping what it
// held), and both connections return to ordinary I/O. src's ordinary
// reading stays stopped: a splice ends at EOF or on close.
func (l *Loop) endSplice(s *splice) {
	if s.ended {
		return
	}
	s.ended = true
	s.src.aux.spliceSrc, s.dst.aux.spliceDst = nil, nil
	if s.src.state < connTearingDown {
		l.be.watch(s.src.slot, false, false)
	}
	if s.waitOut && s.dst.state < connTearingDown {
		l.be.watch(s.dst.slot, true, false)
	}
	l.putPipe(s.pipe, s.queued == 0)
}

// spliceTeardown ends the splices c takes part in when c is torn down. A
// splice into c cannot go on, so its source is aborted.
func (l *Loop) spliceTeardown(c *Conn) {
	if s := c.spliceSrc(); s != nil {
		l.endSplice(s)
	}
	if s := c.spliceDst(); s != nil {
		l.endSplice(s)
		l.abort(s.src, ErrSpliceBroken)
	}
}

// getPipe returns an empty pipe from the loop's pool or a new one. A new
// pipe is refused once the table of descriptors is half full: a splice
// only saves copying, while a socket is a client served, and a spliced
// pair takes six descriptors where a copied one takes two, so under a low
// limit pipes would otherwise take the descriptors accepts and dials
// need. The kernel gives out the lowest free descriptor, so when a new
// pipe's is past half the soft limit, at least half the table is in use.
func (l *Loop) getPipe() (spipe, error) {
	if n := len(l.splice.pipes); n > 0 {
		p := l.splice.pipes[n-1]
		l.splice.pipes = l.splice.pipes[:n-1]
		return p, nil
	}
	var fds [2]int
	if err := pipe2(&fds); err != nil {
		return spipe{}, os.NewSyscallError("pipe2", err)
	}
	p := spipe{r: fds[0], w: fds[1]}
	if limit := softFDLimit(); uint64(p.w) >= limit/2 {
		closePipe(p)
		return spipe{}, fmt.Errorf("pipe2: descriptor %d is in the upper half of RLIMIT_NOFILE (%d), which is kept for sockets", p.w, limit)
	}
	size, err := setPipeSize(p.w, splicePipeSize)
	if err != nil {
		closePipe(p)
		return spipe{}, os.NewSyscallError("fcntl", err)
	}
	p.size = size
	return p, nil
}

// putPipe keeps an empty pipe for reuse and closes anything else.
func (l *Loop) putPipe(p spipe, empty bool) {
	if !empty || l.stopping || len(l.splice.pipes) >= poolCap() {
		closePipe(p)
		return
	}
	p.pooled = l.now
	l.splice.pipes = append(l.splice.pipes, p)
	switch {
	case l.splice.trim == nil:
		l.splice.trim = l.AfterFunc(pipeIdle, l.trimPipes)
	case !l.splice.trim.Pending():
		l.splice.trim.Reset(pipeIdle)
	}
}

// poolCap returns how many idle pipes a loop may keep under the current
// soft RLIMIT_NOFILE.
func poolCap() int {
	return int(min(maxPooledPipes, softFDLimit()/pipeFDShare/2))
}

// trimPipes closes the pipes that have been in the pool for pipeIdle and
// runs again when the oldest of the others will have been. getPipe takes
// the newest, so the pool is ordered oldest first.
func (l *Loop) trimPipes() {
	n := 0
	for n < len(l.splice.pipes) && l.now-l.splice.pipes[n].pooled >= int64(pipeIdle) {
		closePipe(l.splice.pipes[n])
		n++
	}
	l.splice.pipes = append(l.splice.pipes[:0], l.splice.pipes[n:]...)
	if len(l.splice.pipes) > 0 {
		l.splice.trim.Reset(time.Duration(l.splice.pipes[0].pooled + int64(pipeIdle) - l.now))
	}
}

// closePipes closes the pooled pipes when the loop stops.
func (l *Loop) closePipes() {
	for _, p := range l.splice.pipes {
		closePipe(p)
	}
	l.splice.pipes = nil
	l.splice.trim.Stop()
}

func closePipe(p spipe) {
	closeFD(p.r)
	closeFD(p.w)
}
