package net

import (
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// portableBackend drives sockets through Go's own net package, so the
// runtime's poller (epoll here, kqueue on macOS and the BSDs, IOCP on
// Windows) does the waiting. The loop stays one goroutine that runs every
// callback; the waiting happens on helper goroutines that report back
// through the backend's event queue, which poll drains on the loop:
//
//   - reads, on unix (backend_portable_unix.go): per connection a watcher
//     goroutine waits in the poller for input and reports it; the loop
//     reads with read(2) into its one buffer until EAGAIN, as on epoll;
//   - reads, on Windows (backend_portable_windows.go): per connection a
//     reader goroutine does a blocking Read into its own buffer when the
//     loop grants it one and hands the bytes over;
//   - writes go straight from the loop (write(2) on the loop's
//     descriptor) while the socket takes them; once it is full, a writer
//     goroutine, started then, writes the head of the output queue with a
//     blocking Write and reports how much went out;
//   - per listener an accept goroutine waits for the listening socket
//     through the poller and accepts a batch, which the loop takes before
//     it accepts again;
//   - per datagram socket a goroutine reports input readiness, and the
//     loop reads and writes the datagrams itself as on epoll.
//
// What it costs, against epoll: a goroutine per connection (two once its
// socket was full), a duplicate descriptor per connection (net's), and a
// goroutine switch plus a queue hop per burst of input (and per write to
// a full socket) instead of an epoll event.
// It is for development and portability, not the fast path. It has no
// splice and no in-kernel file send (SpliceTo refuses, SendFile copies).
type portableBackend struct {
	ev     sink
	budget int

	mu     sync.Mutex
	queue  []func() // reports waiting for the loop, run by poll
	spare  []func()
	wakeCh chan struct{} // one token: the loop has something to look at
	timer  *time.Timer

	conns   []*pconn
	lns     []*plisten
	pkts    []*ppkt
	iov     [16]iovec // gathers the output for one writev, as on epoll
	readBuf []byte    // unix: the loop reads every connection's input into it
}

// pconn is the backend's record of one connection slot. The fields here
// are the loop's; the reading half (preader) is per system.
type pconn struct {
	fd int
	nc net.Conn
	q  *outQueue

	want       bool // reading is on
	eof        bool
	sending    bool
	connecting bool
	closed     bool

	wr   chan []byte   // the next bytes to write; nil until the writer runs
	done chan struct{} // closed by close
	wg   sync.WaitGroup
	preader
}

func newPconn(fd int, q *outQueue) *pconn {
	p := &pconn{fd: fd, q: q, done: make(chan struct{})}
	p.preader.init()
	return p
}

// pack is the loop's answer to an acceptor: stop (back off; listen
// starts a new acceptor), or go on, waiting first if the queue was found
// empty.
type pack struct{ stop, empty bool }

func newPortableBackend(cfg *Config, ev sink) (*portableBackend, error) {
	return &portableBackend{
		ev: ev, budget: cfg.Budget,
		wakeCh: make(chan struct{}, 1),
	}, nil
}

// post queues a report for the loop and wakes it. Safe from any goroutine.
func (b *portableBackend) post(fn func()) {
	b.later(fn)
	b.wake()
}

// later queues fn for the loop's next poll without a wake-up: from the
// loop itself, which looks at the queue before it waits.
func (b *portableBackend) later(fn func()) {
	b.mu.Lock()
	b.queue = append(b.queue, fn)
	b.mu.Unlock()
}

func (b *portableBackend) wake() {
	select {
	case b.wakeCh <- struct{}{}:
	default:
	}
}

func (b *portableBackend) poll(timeout time.Duration) (bool, error) {
	b.mu.Lock()
	empty := len(b.queue) == 0
	b.mu.Unlock()
	if empty && timeout != 0 {
		b.wait(timeout)
	}
	b.mu.Lock()
	run := b.queue
	n := min(len(run), b.budget)
	if n == len(run) {
		b.queue = b.spare[:0]
	} else {
		b.queue = append(b.spare[:0], run[n:]...)
	}
	more := len(b.queue) > 0
	b.mu.Unlock()
	for i := range n {
		run[i]()
		run[i] = nil
	}
	clear(run[n:])
	b.spare = run[:0]
	return more, nil
}

// wait blocks until a report or a wake arrives, or timeout (<0: none)
// passes.
func (b *portableBackend) wait(timeout time.Duration) {
	if timeout < 0 {
		<-b.wakeCh
		b.gather()
		return
	}
	if b.timer == nil {
		b.timer = time.NewTimer(timeout)
	} else {
		b.timer.Reset(timeout) // Go 1.23 timers: no stale value to drain
	}
	select {
	case <-b.wakeCh:
		b.timer.Stop()
		b.gather()
	case <-b.timer.C:
	}
}

// gather lets the goroutines that are ready run before the loop takes
// its reports. The poller readies the watchers of every socket with input
// at once, but the first one's wake-up puts the loop next in line (a
// channel's receiver runs next), ahead of the rest: without the yield the
// loop took one or two reports per wake-up (264,455 parks for 363,082
// reports under a 64-connection echo), with it 4 to 8. The wake-up tokens
// the others left are taken too, since their reports are about to be
// run: a later post leaves one of its own.
func (b *portableBackend) gather() {
	runtime.Gosched()
	select {
	case <-b.wakeCh:
	default:
	}
}

// live reports whether p is still slot's open record.
func (b *portableBackend) live(slot uint32, p *pconn) bool {
	return int(slot) < len(b.conns) && b.conns[slot] == p && !p.closed
}

// writer writes what the loop hands it with a blocking Write (the
// poller waits for room) and reports how much went out. It starts with
// the first write that finds the socket full: most connections never
// need one. close ends it by closing wr.
func (b *portableBackend) writer(slot uint32, p *pconn) {
	defer p.wg.Done()
	for out := range p.wr {
		n, err := p.nc.Write(out)
		b.post(func() { b.writeDone(slot, p, n, err) })
	}
}

// startWriter hands out (the head of p's queue) to p's writer, starting
// it the first time.
func (b *portableBackend) startWriter(slot uint32, p *pconn, out []byte) {
	if p.wr == nil {
		p.wr = make(chan []byte, 1)
		p.wg.Add(1)
		go b.writer(slot, p)
	}
	p.wr <- out
}

// send writes from the loop while the socket takes the bytes at once, as
// epoll does, so that pending output is acknowledged before the loop runs
// more user code (a water mark or a pending-output limit sees what the
// kernel really holds); once the socket is full, the writer goroutine
// waits in the poller with the rest.
func (b *portableBackend) send(slot uint32) {
	p := b.conns[slot]
	for {
		if p == nil || !b.live(slot, p) || p.sending || p.connecting {
			return
		}
		// The queue keeps these bytes in place until sent reports them.
		k, total := p.q.peekv(b.iov[:])
		if total == 0 {
			return
		}
		n, err := rawWritev(p.fd, b.iov[:k])
		clear(b.iov[:k])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			p.sending = true
			b.startWriter(slot, p, p.q.peek())
			return
		case err != nil:
			b.ev.failed(slot, os.NewSyscallError("write", err))
			return
		}
		b.ev.sent(slot, n)
	}
}

func (b *portableBackend) writeDone(slot uint32, p *pconn, n int, err error) {
	if !b.live(slot, p) {
		return
	}
	p.sending = false
	if n > 0 {
		b.ev.sent(slot, n)
		if !b.live(slot, p) {
			return
		}
	}
	if err != nil {
		b.ev.failed(slot, err)
		return
	}
	b.send(slot)
}

// watch is never asked for: SpliceTo refuses this backend and SendFile
// copies through the output queue.
func (b *portableBackend) watch(uint32, bool, bool) {}

func (b *portableBackend) close(slot uint32) {
	p := b.conns[slot]
	if p == nil || p.closed {
		return
	}
	p.closed = true
	close(p.done)
	if p.wr != nil {
		close(p.wr)
	}
	// Closing the duplicate ends a waiting Read or Write; the socket
	// itself goes once the loop's descriptor is closed too. That one is
	// closed only with the released report, on the loop: closed here, its
	// number could be reused by the next accept while the loop, which
	// owns it until released, still shuts down or lingers "its" socket
	// (TestClientsLeavingDoNotEject/portable: clients of the next round
	// were cut before their answer).
	if p.nc != nil { // nil while a Windows dial is under way
		_ = p.nc.Close()
	}
	go func() {
		p.wg.Wait()
		b.post(func() {
			if b.conns[slot] == p {
				b.conns[slot] = nil
				closeFD(p.fd)
				b.ev.released(slot)
			}
		})
	}()
}

func (b *portableBackend) shutdown() error { return nil }

// startAcceptor runs listener idx's acceptor goroutine unless one runs.
func (b *portableBackend) startAcceptor(idx uint32, ln *plisten) {
	if !ln.running {
		ln.running = true
		ln.wg.Add(1)
		go b.acceptor(idx, ln)
	}
}

func (b *portableBackend) unlisten(idx uint32) {
	ln := b.lns[idx]
	if ln == nil {
		b.ev.listenerClosed(idx)
		return
	}
	b.lns[idx] = nil
	close(ln.done)
	ln.interrupt()
	go func() {
		ln.wg.Wait()
		b.post(func() { b.ev.listenerClosed(idx) })
	}()
}

// closePacket stops datagram socket idx's goroutines; once they have
// returned, on the loop, the socket is forgotten, its descriptor closes
// (as for connections: close) and the loop hears of it.
func (b *portableBackend) closePacket(idx uint32) {
	p := b.pkts[idx]
	if p == nil {
		return
	}
	b.pkts[idx] = nil
	close(p.done)
	p.interrupt()
	go func() {
		p.wg.Wait()
		b.post(func() {
			p.forget()
			closeFD(p.fd)
			b.ev.packetClosed(idx)
		})
	}()
}
