package reactor

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/epoll"
	"github.com/veloq/veloq/internal/sock"
)

// epollBackend drives sockets with edge-triggered epoll: every connection
// is registered once for In|Out|RDHup, reads go until EAGAIN (bounded per
// event for fairness) and writes go straight from the connection's output
// buffer with write(2).
type epollBackend struct {
	l       *Loop
	p       *epoll.Poller
	events  []epoll.Event
	readBuf []byte
	// retry holds connections (and listeners) whose read or accept stopped
	// before EAGAIN, to be continued next iteration: with edge triggering
	// no further event would announce what is already there.
	retryRead   []*Conn
	retryAccept []*listener
}

const (
	connEvents   = epoll.In | epoll.Out | epoll.RDHup | epoll.EdgeTriggered
	maxReadsOnce = 8
	maxAccepts   = 64
)

func newEpollBackend(l *Loop) (*epollBackend, error) {
	p, err := epoll.New()
	if err != nil {
		return nil, err
	}
	return &epollBackend{
		l: l, p: p,
		events:  make([]epoll.Event, l.cfg.Budget),
		readBuf: make([]byte, 64<<10),
	}, nil
}

func (b *epollBackend) wake() { _ = b.p.Wake() }

func (b *epollBackend) poll(timeout time.Duration) error {
	l := b.l
	if len(b.retryRead) > 0 || len(b.retryAccept) > 0 {
		timeout = 0
		b.runRetries()
	}
	n, err := b.p.Wait(b.events, timeout)
	if err != nil {
		return err
	}
	if n > 0 {
		l.now = l.clock() // the wait may have been long: handlers stamp activity with it
	}
	l.stats.completions.Add(uint64(n))
	for i := 0; i < n; i++ {
		ev := b.events[i]
		op, slot, gen := untoken(ev.Data)
		if op == opAccept {
			if int(slot) < len(l.listeners) && l.listeners[slot] != nil && l.listeners[slot].gen == gen {
				b.accept(l.listeners[slot])
			}
			continue
		}
		c := l.lookup(slot, gen)
		if c == nil {
			continue
		}
		b.event(c, ev.Events)
	}
	if n == len(b.events) || len(b.retryRead) > 0 || len(b.retryAccept) > 0 {
		l.more = true
	}
	return nil
}

func (b *epollBackend) runRetries() {
	reads, accepts := b.retryRead, b.retryAccept
	b.retryRead, b.retryAccept = nil, nil
	for _, c := range reads {
		if c.state == connOpen && !c.paused {
			b.read(c, true)
		}
	}
	for _, ln := range accepts {
		if !ln.closing {
			b.accept(ln)
		}
	}
}

func (b *epollBackend) event(c *Conn, ev uint32) {
	l := b.l
	if c.connecting {
		if ev&(epoll.Out|epoll.Err|epoll.Hup) != 0 {
			l.connected(c, sock.SoError(c.fd))
		}
		return
	}
	if s := c.spliceSrc; s != nil && ev&(epoll.In|epoll.RDHup|epoll.Err|epoll.Hup) != 0 {
		l.pump(s) // the splice reads this connection (splice.go)
	}
	if s := c.spliceDst; s != nil && s.waitOut && ev&(epoll.Out|epoll.Err|epoll.Hup) != 0 {
		s.waitOut = false
		l.pump(s)
	}
	if ev&(epoll.In|epoll.RDHup|epoll.Err|epoll.Hup) != 0 {
		if !(c.state == connOpen && c.paused) { // paused: resumeRead retries the read
			// A FIN that arrived with the data raises no edge of its own:
			// with RDHup/Hup set, read on past a short read to find it.
			b.read(c, ev&(epoll.RDHup|epoll.Hup|epoll.Err) != 0)
		}
	}
	if ev&epoll.Out != 0 && c.state != connClosed && c.state != connTearingDown && c.pendingOut() > 0 {
		b.flush(c)
		l.afterWrite(c)
	}
}

// read drains the socket into the loop's read buffer, handing each chunk
// to the handler.
func (b *epollBackend) read(c *Conn, toEOF bool) {
	l := b.l
	for i := 0; ; i++ {
		if c.state != connOpen || c.paused || c.eof {
			return
		}
		if i == maxReadsOnce {
			b.retryRead = append(b.retryRead, c)
			return
		}
		n, err := unix.Read(c.fd, b.readBuf)
		switch {
		case err == unix.EAGAIN:
			return
		case err == unix.EINTR:
			continue
		case err != nil:
			l.abort(c, os.NewSyscallError("read", err))
			return
		case n == 0:
			l.onEOF(c)
			return
		}
		l.onData(c, b.readBuf[:n])
		if n < len(b.readBuf) && !toEOF {
			return // drained; a later arrival raises a new edge
		}
	}
}

// flush writes sending, then whatever was queued in out meanwhile. Both
// can be non-empty here: when an Out edge resumes a write that stopped on
// EAGAIN, handlers may have queued more output in between, and its dirty
// mark was spent on the flush that hit EAGAIN.
func (b *epollBackend) flush(c *Conn) {
	l := b.l
	for {
		if c.sending == nil && !l.nextSend(c) {
			return
		}
		for c.sendOff < len(c.sending) {
			n, err := unix.Write(c.fd, c.sending[c.sendOff:])
			if err == unix.EINTR {
				continue
			}
			if err == unix.EAGAIN {
				return // an Out edge continues
			}
			if err != nil {
				l.abort(c, os.NewSyscallError("write", err))
				return
			}
			c.sendOff += n
			c.lastActive = l.now
			l.stats.bytesOut.Add(uint64(n))
		}
		l.releaseSending(c)
	}
}

func (b *epollBackend) addListener(ln *listener) error {
	ln.gen++
	if err := b.p.Add(ln.fd, epoll.In|epoll.EdgeTriggered, token(opAccept, ln.idx, ln.gen&0xffffff)); err != nil {
		return err
	}
	b.accept(ln) // connections may already wait in the backlog
	return nil
}

func (b *epollBackend) accept(ln *listener) {
	l := b.l
	for i := 0; i < maxAccepts; i++ {
		if ln.closing {
			return
		}
		fd, _, err := unix.Accept4(ln.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			if err == unix.EAGAIN {
				return
			}
			if l.acceptFailed(ln, os.NewSyscallError("accept4", err), func() { b.accept(ln) }) {
				return
			}
			continue
		}
		l.onAccept(ln, fd)
	}
	b.retryAccept = append(b.retryAccept, ln)
}

func (b *epollBackend) closeListener(ln *listener) {
	_ = b.p.Del(ln.fd)
	b.l.listenerClosed(ln)
}

func (b *epollBackend) addConn(c *Conn) error {
	return b.p.Add(c.fd, connEvents, c.token(opRecv))
}

func (b *epollBackend) connect(c *Conn, a sock.Addr) error {
	err := unix.Connect(c.fd, a.SA)
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		return os.NewSyscallError("connect", err)
	}
	// Registered for Out either way: a connect that finished at once
	// reports writability on the first wait, so OnOpen never runs inside
	// Dial.
	return b.p.Add(c.fd, connEvents, c.token(opRecv))
}

func (b *epollBackend) startRead(c *Conn) error {
	// Data may have arrived with the connect; its edge was consumed while
	// connecting.
	b.retryRead = append(b.retryRead, c)
	return nil
}

func (b *epollBackend) pauseRead(c *Conn) {}

func (b *epollBackend) resumeRead(c *Conn) {
	// Edges seen while paused were not acted on, and data that arrived
	// before the pause raised no new edge: try a read now.
	b.retryRead = append(b.retryRead, c)
}

func (b *epollBackend) readStopped(c *Conn) bool { return true }

func (b *epollBackend) recycle(uint16) {} // epoll reads into one buffer: nothing is kept

// Splices need nothing more: every connection is registered for In and
// Out edges, and event routes them to the pump.
func (b *epollBackend) spliceArm(s *splice)     {}
func (b *epollBackend) spliceWaitOut(s *splice) {}
func (b *epollBackend) spliceStop(s *splice)    {}

func (b *epollBackend) closeConn(c *Conn) {
	// close(2) removes the fd from the epoll set.
	unix.Close(c.fd)
	b.l.finalize(c)
}

func (b *epollBackend) close() error { return b.p.Close() }
