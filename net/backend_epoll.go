//go:build linux

package net

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
// event for fairness) into a loop-wide buffer (lent to ForwardTo, see
// readLender), and writes go straight from the output queue with
// write(2). The epoll package owns the waker
// (an eventfd in the same epoll set).
type epollBackend struct {
	ev      sink
	p       *epoll.Poller
	events  []epoll.Event
	readBuf []byte
	lend    readLender
	conns   table[econn]
	lns     []elisten
	pkts    []epkt // datagram sockets (udp_epoll.go)
	// Work that no new edge will announce, continued on the next poll:
	// reads and accepts stopped before EAGAIN, reading switched on with
	// input possibly already there, and input watches just begun.
	// retrySpare is the other of the two lists runRetries alternates
	// between, so that the list is not made anew for every poll that
	// has retries: it was for every batch of new connections (each has
	// one), 120 KB of garbage for 4,000 connecting clients.
	retry, retrySpare []eretry
	act               activity
	// iov gathers the output queue's segments for one writev (see
	// outQueue.peekv); 16 covers a head, a chunk's framing around its
	// data and the receive buffers ForwardTo queues (4 per connection).
	iov [16]unix.Iovec
	// closeq holds the connections to be closed by poll (closeQueue).
	closeq closeQueue
}

// econn is the backend's record of one connection slot.
type econn struct {
	fd         int
	gen        uint32
	q          *outQueue
	reading    bool
	connecting bool
	eof        bool
	waitOut    bool // a write hit EAGAIN: the Out edge continues it
	watchIn    bool // input is reported as readiness, not read
	watchOut   bool
	closing    bool  // in closeq: no more reports
	epoch      uint8 // activity epoch of its last input
}

type elisten struct {
	fd      int
	gen     uint32
	added   bool // in the epoll set
	backOff bool
}

type eretry struct {
	slot, gen uint32
	what      uint8
}

const (
	retryRead uint8 = iota
	retryAccept
	retryWatch
)

const connEvents = epoll.In | epoll.Out | epoll.RDHup | epoll.EdgeTriggered

func newEpollBackend(cfg *Config, ev sink) (*epollBackend, error) {
	p, err := epoll.New()
	if err != nil {
		return nil, err
	}
	b := &epollBackend{
		ev: ev, p: p,
		events: make([]epoll.Event, cfg.Budget),
	}
	b.readBuf = b.lend.next()
	if cfg.BatchWait > 0 {
		b.act.enable(cfg.BatchWait, epollLeastBatch)
	}
	return b, nil
}

func (b *epollBackend) wake() { _ = b.p.Wake() }

func (b *epollBackend) conn(slot, gen uint32) *econn {
	if int(slot) >= b.conns.len() {
		return nil
	}
	if e := b.conns.at(slot); e.live(gen) {
		return e
	}
	return nil
}

// live reports whether e is still the record of the connection of
// generation gen: a report may close the slot or reopen it for another.
// A record never moves (table), so after a report the caller checks the
// record it holds instead of looking the slot up again.
func (e *econn) live(gen uint32) bool { return e.gen == gen && e.fd >= 0 && !e.closing }

func (b *epollBackend) poll(timeout time.Duration) (bool, error) {
	if len(b.retry) > 0 {
		timeout = 0
		b.runRetries()
	}
	if b.closeq.run(b.closeFD) {
		// Released reports run OnClose, which may queue output or
		// close more: the loop goes round again before it waits.
		timeout = 0
	}
	timeout = b.pause(timeout)
	b.act.inputs = 0
	n, err := b.p.Wait(b.events, timeout)
	if err != nil {
		return false, err
	}
	for i := 0; i < n; i++ {
		ev := b.events[i]
		op, slot, gen := untoken(ev.Data)
		if op == opAccept {
			if int(slot) < len(b.lns) && b.lns[slot].gen&0xffffff == gen && b.lns[slot].added {
				b.accept(slot)
			}
			continue
		}
		if op == opPktIn {
			b.packetEvent(slot, gen, ev.Events)
			continue
		}
		b.event(slot, gen, ev.Events)
	}
	return n == len(b.events) || len(b.retry) > 0, nil
}

// epollLeastBatch is the least number of events a paused wait is taken
// for (see pause): one per batchShare of 32 busy connections.
const epollLeastBatch = 8

// pause is the epoll form of a batched wait (Config.BatchWait). epoll_wait
// returns at the first ready event and has no minimum wait, so a loop that
// would block sleeps for BatchWait first and then collects whatever
// arrived meanwhile: with many busy peers that is one wait per batch
// instead of one per message or two. Unlike io_uring's minimum wait the
// sleep cannot end early when the batch is complete, nor when the loop is
// woken (a Post waits out the pause), so it is taken only where it pays:
// with at least 32 connections sending input in the last activity epoch
// and fewer inputs since the last wait than a quarter of them (a loop
// that is already behind finds its events waiting and never pauses). It
// returns what is left of timeout.
func (b *epollBackend) pause(timeout time.Duration) time.Duration {
	if b.act.wait <= 0 || timeout == 0 || timeout > 0 && timeout <= b.act.wait {
		return timeout
	}
	if want := b.act.share(); want == 0 || b.act.inputs >= want {
		return timeout
	}
	ts := unix.NsecToTimespec(int64(b.act.wait))
	_ = unix.Nanosleep(&ts, nil) // EINTR only makes the pause shorter
	if timeout > 0 {
		timeout -= b.act.wait
	}
	return timeout
}

func (b *epollBackend) runRetries() {
	work := b.retry
	b.retry = b.retrySpare[:0] // what the reports below add (poll alone calls runRetries)
	for _, r := range work {
		switch r.what {
		case retryAccept:
			if int(r.slot) < len(b.lns) && b.lns[r.slot].gen == r.gen && b.lns[r.slot].added {
				b.accept(r.slot)
			}
		case retryRead:
			if e := b.conn(r.slot, r.gen); e != nil && e.reading && !e.watchIn {
				b.read(r.slot, true)
			}
		case retryWatch:
			if e := b.conn(r.slot, r.gen); e != nil && e.watchIn {
				b.ev.ready(r.slot, false)
			}
		}
	}
	b.retrySpare = work[:0]
}

func (b *epollBackend) event(slot, gen uint32, ev uint32) {
	e := b.conn(slot, gen)
	if e == nil {
		return
	}
	const inEv, outEv = epoll.In | epoll.RDHup | epoll.Err | epoll.Hup, epoll.Out | epoll.Err | epoll.Hup
	if e.connecting {
		if ev&outEv != 0 {
			e.connecting = false
			b.ev.connected(slot, sock.SoError(e.fd))
		}
		return
	}
	// Each report may close or reopen the slot: check the record again
	// after every one.
	if ev&inEv != 0 {
		switch {
		case e.watchIn:
			b.ev.ready(slot, false)
		case e.reading:
			// A FIN that arrived with the data raises no edge of its own:
			// with RDHup/Hup set, read on past a short read to find it.
			b.read(slot, ev&(epoll.RDHup|epoll.Hup|epoll.Err) != 0)
		}
		// Not reading: setReading(true) retries the read, since the edge
		// is spent.
	}
	if !e.live(gen) || ev&outEv == 0 {
		return
	}
	if e.watchOut {
		e.watchOut = false
		b.ev.ready(slot, true)
		if !e.live(gen) {
			return
		}
	}
	if e.waitOut {
		e.waitOut = false
		b.send(slot)
	}
}

// read drains the socket into the read buffer, reporting each chunk.
func (b *epollBackend) read(slot uint32, toEOF bool) {
	e := b.conns.at(slot)
	gen := e.gen
	for i := 0; ; i++ {
		if !e.live(gen) || !e.reading || e.eof || e.watchIn {
			return
		}
		if i == maxReadsOnce {
			b.retry = append(b.retry, eretry{slot, gen, retryRead})
			return
		}
		n, err := sock.RawRead(e.fd, b.readBuf)
		switch {
		case err == unix.EAGAIN:
			return
		case err == unix.EINTR:
			continue
		case err != nil:
			b.ev.failed(slot, os.NewSyscallError("read", err))
			return
		case n == 0:
			e.eof = true
			b.ev.eof(slot)
			return
		}
		b.act.input(&e.epoch)
		bid := b.lend.offer(n)
		if b.ev.input(slot, b.readBuf[:n], bid) {
			b.readBuf = b.lend.lent()
		}
		if n < len(b.readBuf) && !toEOF {
			return // drained; a later arrival raises a new edge
		}
	}
}

// send writes the output queue until it is empty or the socket is full;
// then the Out edge continues.
func (b *epollBackend) send(slot uint32) {
	e := b.conns.at(slot)
	gen := e.gen
	for {
		if !e.live(gen) || e.waitOut || e.connecting {
			return
		}
		k, total := e.q.peekv(b.iov[:])
		if total == 0 {
			return
		}
		n, err := sock.RawWritev(e.fd, b.iov[:k])
		clear(b.iov[:k]) // hold no segment past the call
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			e.waitOut = true
			return
		case err != nil:
			b.ev.failed(slot, os.NewSyscallError("write", err))
			return
		}
		b.ev.sent(slot, n)
	}
}

func (b *epollBackend) listen(idx uint32, fd int) error {
	for int(idx) >= len(b.lns) {
		b.lns = append(b.lns, elisten{fd: -1})
	}
	ln := &b.lns[idx]
	if ln.fd != fd {
		*ln = elisten{fd: fd, gen: (ln.gen + 1) & 0xffffff}
	}
	ln.backOff = false
	if !ln.added {
		if err := b.p.Add(fd, epoll.In|epoll.EdgeTriggered, token(opAccept, idx, ln.gen)); err != nil {
			return err
		}
		ln.added = true
	}
	b.accept(idx) // connections may already wait in the backlog
	return nil
}

func (b *epollBackend) accept(idx uint32) {
	more, backOff := acceptBatch(b.ev, idx, func() int {
		if ln := &b.lns[idx]; ln.added && !ln.backOff {
			return ln.fd
		}
		return -1
	})
	switch {
	case backOff:
		b.lns[idx].backOff = true // listen restarts it
	case more:
		b.retry = append(b.retry, eretry{idx, b.lns[idx].gen, retryAccept})
	}
}

func (b *epollBackend) unlisten(idx uint32) {
	ln := &b.lns[idx]
	if ln.added {
		_ = b.p.Del(ln.fd)
	}
	*ln = elisten{fd: -1, gen: ln.gen}
	b.ev.listenerClosed(idx)
}

func (b *epollBackend) open(slot uint32, fd int, q *outQueue, dial unix.Sockaddr) error {
	for int(slot) >= b.conns.len() {
		b.conns.add(econn{fd: -1})
	}
	e := b.conns.at(slot)
	*e = econn{fd: fd, gen: (e.gen + 1) & 0xffffff, q: q}
	if dial != nil {
		err := unix.Connect(fd, dial)
		if err != nil && !errors.Is(err, unix.EINPROGRESS) {
			e.fd = -1
			return os.NewSyscallError("connect", err)
		}
		// Registered for Out either way: a connect that finished at once
		// reports writability on the first wait, so the connected report
		// never comes from inside Dial.
		e.connecting = true
	}
	if err := b.p.Add(fd, connEvents, token(opRecv, slot, e.gen)); err != nil {
		e.fd = -1
		return err
	}
	return nil
}

func (b *epollBackend) setReading(slot uint32, on bool) {
	e := b.conns.at(slot)
	if on && !e.reading {
		// Edges seen while not reading were not acted on, and input that
		// arrived before raises no new edge: try a read now.
		b.retry = append(b.retry, eretry{slot, e.gen, retryRead})
	}
	e.reading = on
}

// watch needs no kernel request: every connection is registered for In
// and Out edges, and event routes them to ready reports. An input watch
// reports once at the start, since input may wait without a new edge.
func (b *epollBackend) watch(slot uint32, out, on bool) {
	e := b.conns.at(slot)
	if out {
		e.watchOut = on
		return
	}
	if on && !e.watchIn {
		b.retry = append(b.retry, eretry{slot, e.gen, retryWatch})
	}
	e.watchIn = on
}

// pace needs nothing: a read takes one buffer, and reading stops as soon
// as the loop no longer wants input.
func (b *epollBackend) pace(uint32) {}

func (b *epollBackend) recycle(bid uint16) { b.lend.recycle(bid) }

func (b *epollBackend) close(slot uint32) {
	e := b.conns.at(slot)
	if e.fd < 0 || e.closing {
		return
	}
	e.closing = true
	b.closeq.push(slot)
}

// closeFD closes the socket of slot (close(2) removes it from the epoll
// set) and reports it released.
func (b *epollBackend) closeFD(slot uint32) {
	e := b.conns.at(slot)
	unix.Close(e.fd)
	e.fd, e.q, e.closing = -1, nil, false
	b.ev.released(slot)
}

func (b *epollBackend) shutdown() error { return b.p.Close() }
