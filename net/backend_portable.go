package net

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/internal/sock"
)

// portableBackend drives sockets through Go's own net package, so the
// runtime's poller (epoll here, kqueue on macOS and the BSDs, IOCP on
// Windows) does the waiting. The loop stays one goroutine that runs every
// callback; the blocking work happens on helper goroutines that report
// back through the backend's event queue, which poll drains on the loop:
//
//   - per connection a reader goroutine does a blocking Read into its own
//     buffer when the loop grants it one, and hands the bytes over; the
//     next read is granted only once the loop has taken them, so at most
//     one buffer per connection is ahead of the handler (pace is the
//     default), and setReading(false) interrupts a waiting Read with a
//     past read deadline;
//   - writes go straight from the loop (write(2) on the loop's
//     descriptor) while the socket takes them; once it is full, a writer
//     goroutine per connection writes the head of the output queue with a
//     blocking Write and reports how much went out;
//   - per listener an accept goroutine waits for the listening socket
//     through the poller and accepts a batch, which the loop takes before
//     it accepts again;
//   - per datagram socket a goroutine reports input readiness, and the
//     loop reads and writes the datagrams itself as on epoll.
//
// What it costs, against epoll: two goroutines per connection (8 KiB of
// stack each at least) and a portableReadSize buffer, a duplicate
// descriptor per connection (net.FileConn's), and a goroutine switch plus
// a queue hop per read (and per write to a full socket) instead of a
// system call on the loop.
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

	conns []*pconn
	lns   []*plisten
	pkts  []*ppkt
	iov   [16]unix.Iovec // gathers the output for one writev, as on epoll
}

// portableReadSize is each connection's receive buffer: net/http's
// bufio reader is 4 KiB; 16 KiB keeps a bulk transfer at a few reads
// per TLS record-sized chunk while idle connections stay cheap.
const portableReadSize = 16 << 10

// pconn is the backend's record of one connection slot. The loop-side
// fields are touched only on the loop; mu guards want against the reader.
type pconn struct {
	fd int
	nc net.Conn
	q  *outQueue

	busy       bool // a read is granted and not yet reported
	eof        bool
	sending    bool
	connecting bool
	closed     bool

	mu    sync.Mutex
	want  bool          // reading is on (the reader clears its deadline only then)
	grant chan struct{} // one token per read the loop allows
	wr    chan []byte   // the next bytes to write
	done  chan struct{} // closed by close
	wg    sync.WaitGroup
}

type plisten struct {
	fd      int
	f       *os.File // a pollable duplicate of fd
	rc      syscall.RawConn
	running bool          // an accept goroutine is running
	ack     chan pack     // the loop's answer to a batch
	done    chan struct{} // closed by unlisten
	wg      sync.WaitGroup
}

func newPortableBackend(cfg *Config, ev sink) (*portableBackend, error) {
	return &portableBackend{
		ev: ev, budget: cfg.Budget,
		wakeCh: make(chan struct{}, 1),
	}, nil
}

// post queues a report for the loop and wakes it. Safe from any goroutine.
func (b *portableBackend) post(fn func()) {
	b.mu.Lock()
	b.queue = append(b.queue, fn)
	b.mu.Unlock()
	b.wake()
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
	case <-b.timer.C:
	}
}

// withFile hands net's File* constructors (which duplicate what they are
// given) a descriptor of the loop's. The *os.File wraps a duplicate of
// its own, closed here: an os.File closes its descriptor when it is
// garbage collected, which must never be the loop's.
func withFile(fd int, fn func(*os.File) error) error {
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("fcntl F_DUPFD_CLOEXEC", err)
	}
	f := os.NewFile(uintptr(d), "veloq")
	defer f.Close()
	return fn(f)
}

func (b *portableBackend) open(slot uint32, fd int, q *outQueue, dial unix.Sockaddr) error {
	for int(slot) >= len(b.conns) {
		b.conns = growTable(b.conns, nil)
	}
	if dial != nil {
		if err := unix.Connect(fd, dial); err != nil && !errors.Is(err, unix.EINPROGRESS) {
			return os.NewSyscallError("connect", err)
		}
	}
	var nc net.Conn
	opts := saveSockOpts(fd)
	if err := withFile(fd, func(f *os.File) (err error) { nc, err = net.FileConn(f); return err }); err != nil {
		return err
	}
	opts.restore(fd)
	p := &pconn{
		fd: fd, nc: nc, q: q,
		grant: make(chan struct{}, 1), wr: make(chan []byte, 1),
		done: make(chan struct{}),
	}
	b.conns[slot] = p
	p.wg.Add(2)
	go b.reader(slot, p)
	go b.writer(slot, p)
	if dial != nil {
		// Reported from a goroutine, so never from inside Dial.
		p.connecting = true
		p.wg.Add(1)
		go b.connect(slot, p)
	}
	return nil
}

// connect waits through the poller for the connect to finish.
func (b *portableBackend) connect(slot uint32, p *pconn) {
	defer p.wg.Done()
	var cerr error
	err := rawConn(p.nc, func(rc syscall.RawConn) error {
		return rc.Write(func(fd uintptr) bool {
			if cerr = sock.SoError(int(fd)); cerr != nil {
				return true
			}
			return sock.Connected(int(fd))
		})
	})
	if cerr == nil {
		cerr = err
	}
	b.post(func() {
		if b.live(slot, p) && p.connecting {
			p.connecting = false
			b.ev.connected(slot, cerr)
		}
	})
}

// sockOpts are the TCP options the loop set (configure) that
// net.FileConn overrides: it turns TCP_NODELAY on and keep-alive on with
// Go's defaults for every TCP connection it makes.
type sockOpts struct {
	ok                       bool
	noDelay, keepAlive       int
	keepIdle, keepIntvl, cnt int
}

var keepOpts = [...]struct{ level, opt int }{
	{unix.IPPROTO_TCP, unix.TCP_NODELAY}, {unix.SOL_SOCKET, unix.SO_KEEPALIVE},
	{unix.IPPROTO_TCP, sock.KeepIdle}, {unix.IPPROTO_TCP, unix.TCP_KEEPINTVL},
	{unix.IPPROTO_TCP, unix.TCP_KEEPCNT},
}

func (o *sockOpts) vals() [5]*int {
	return [5]*int{&o.noDelay, &o.keepAlive, &o.keepIdle, &o.keepIntvl, &o.cnt}
}

// saveSockOpts reads fd's options; ok is false for a socket without them
// (a Unix socket).
func saveSockOpts(fd int) sockOpts {
	var o sockOpts
	for i, v := range o.vals() {
		var err error
		if *v, err = unix.GetsockoptInt(fd, keepOpts[i].level, keepOpts[i].opt); err != nil {
			return sockOpts{}
		}
	}
	o.ok = true
	return o
}

func (o sockOpts) restore(fd int) {
	if !o.ok {
		return
	}
	for i, v := range o.vals() {
		_ = unix.SetsockoptInt(fd, keepOpts[i].level, keepOpts[i].opt, *v)
	}
}

// rawConn runs fn with c's syscall.RawConn.
func rawConn(c any, fn func(syscall.RawConn) error) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return errors.New("veloq: portable backend: the socket has no raw access")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	return fn(rc)
}

// live reports whether p is still slot's open record.
func (b *portableBackend) live(slot uint32, p *pconn) bool {
	return int(slot) < len(b.conns) && b.conns[slot] == p && !p.closed
}

// aLongTimeAgo is a read deadline that has passed: it ends a waiting Read.
var aLongTimeAgo = time.Unix(1, 0)

func (b *portableBackend) reader(slot uint32, p *pconn) {
	defer p.wg.Done()
	buf := make([]byte, portableReadSize)
	for {
		select {
		case <-p.grant:
		case <-p.done:
			return
		}
		// Under mu, so a setReading(false) that follows sets its past
		// deadline after this clear and ends the Read.
		p.mu.Lock()
		if p.want {
			_ = p.nc.SetReadDeadline(time.Time{})
		}
		p.mu.Unlock()
		n, err := p.nc.Read(buf)
		b.post(func() { b.readDone(slot, p, buf[:n], err) })
	}
}

// readDone reports one read on the loop and grants the next.
func (b *portableBackend) readDone(slot uint32, p *pconn, data []byte, err error) {
	if !b.live(slot, p) {
		return
	}
	if len(data) > 0 {
		// The reader waits for the next grant, so data stays valid for
		// the whole report.
		b.ev.input(slot, data, -1)
		if !b.live(slot, p) {
			return
		}
	}
	p.busy = false
	switch {
	case err == nil || errors.Is(err, os.ErrDeadlineExceeded):
	case errors.Is(err, io.EOF):
		p.eof = true
		b.ev.eof(slot)
		return
	default:
		b.ev.failed(slot, err)
		return
	}
	b.grantRead(p)
}

func (b *portableBackend) grantRead(p *pconn) {
	if p.busy || p.eof || p.closed || !p.want {
		return
	}
	p.busy = true
	p.grant <- struct{}{}
}

func (b *portableBackend) setReading(slot uint32, on bool) {
	p := b.conns[slot]
	p.mu.Lock()
	p.want = on
	if !on && p.busy {
		_ = p.nc.SetReadDeadline(aLongTimeAgo)
	}
	p.mu.Unlock()
	b.grantRead(p)
}

// pace needs nothing: the reader is one buffer ahead at most.
func (b *portableBackend) pace(uint32) {}

func (b *portableBackend) recycle(uint16) {} // reads land in the reader's buffer: nothing is kept

func (b *portableBackend) writer(slot uint32, p *pconn) {
	defer p.wg.Done()
	for {
		var out []byte
		select {
		case out = <-p.wr:
		case <-p.done:
			return
		}
		n, err := p.nc.Write(out)
		b.post(func() { b.writeDone(slot, p, n, err) })
	}
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
		n, err := sock.RawWritev(p.fd, b.iov[:k])
		clear(b.iov[:k])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			p.sending = true
			p.wr <- p.q.peek()
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
	// Closing the duplicate ends a waiting Read or Write; the socket
	// itself goes once the loop's descriptor is closed too. That one is
	// closed only with the released report, on the loop: closed here, its
	// number could be reused by the next accept while the loop, which
	// owns it until released, still shuts down or lingers "its" socket
	// (TestClientsLeavingDoNotEject/portable: clients of the next round
	// were cut before their answer).
	_ = p.nc.Close()
	go func() {
		p.wg.Wait()
		b.post(func() {
			if b.conns[slot] == p {
				b.conns[slot] = nil
				unix.Close(p.fd)
				b.ev.released(slot)
			}
		})
	}()
}

func (b *portableBackend) listen(idx uint32, fd int) error {
	for int(idx) >= len(b.lns) {
		b.lns = append(b.lns, nil)
	}
	ln := b.lns[idx]
	if ln == nil || ln.fd != fd {
		// A net.Listener's raw connection cannot wait for input (its Read
		// is EINVAL), so the poller waits on a pollable *os.File of the
		// listening socket's duplicate: the runtime registers a
		// non-blocking descriptor with its poller.
		d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return os.NewSyscallError("fcntl F_DUPFD_CLOEXEC", err)
		}
		f := os.NewFile(uintptr(d), "veloq listener")
		ln = &plisten{fd: fd, f: f, ack: make(chan pack, 1), done: make(chan struct{})}
		if ln.rc, err = f.SyscallConn(); err != nil {
			_ = f.Close()
			return err
		}
		b.lns[idx] = ln
	}
	if !ln.running {
		ln.running = true
		ln.wg.Add(1)
		go b.acceptor(idx, ln)
	}
	return nil
}

// acceptor waits in the runtime's poller until ln's socket has a
// connection queued and tells the loop, which accepts them itself
// (accepted), then waits for the loop's answer before it waits again.
// The goroutine never takes a connection out of the kernel's queue: one
// taken ahead of the loop would be lost (reset) when the listener stops,
// where one left queued is served by whoever accepts next (after a hot
// upgrade, the new process; TestListenerFilesHandOver).
func (b *portableBackend) acceptor(idx uint32, ln *plisten) {
	defer ln.wg.Done()
	// The first round asks the loop at once: connections may have queued
	// before this goroutine (or its descriptor's registration) existed.
	empty := false
	for {
		if empty {
			// RawConn.Read forgets earlier readiness, then calls f and
			// waits for readability each time f says false. So f's first
			// call looks (poll(2), zero timeout) for a connection queued
			// before the wait began; after it, the edge-triggered runtime
			// poller catches every arrival, even one before it parks. The
			// second call ends the wait. Nothing is consumed.
			waited := false
			err := ln.rc.Read(func(fd uintptr) bool {
				if waited {
					return true
				}
				waited = true
				pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
				n, _ := unix.Poll(pfd[:], 0)
				return n > 0
			})
			if err != nil { // the duplicate was closed: unlisten
				return
			}
		}
		b.post(func() { b.accepted(idx, ln) })
		select {
		case a := <-ln.ack:
			if a.stop {
				return
			}
			empty = a.empty
		case <-ln.done:
			return
		}
	}
}

// pack is the loop's answer to an acceptor: stop (back off; listen
// starts a new acceptor), or go on, waiting first if the queue was found
// empty.
type pack struct{ stop, empty bool }

// accepted takes, on the loop, up to maxAccepts connections from ln's
// socket and reports them; nothing once the listener stopped, so that
// what is queued stays queued.
func (b *portableBackend) accepted(idx uint32, ln *plisten) {
	if b.lns[idx] != ln {
		return
	}
	stop, empty := false, false
	for n := 0; n < maxAccepts; n++ {
		fd, peer, err := sock.Accept(ln.fd)
		if err == unix.EAGAIN {
			empty = true
			break
		}
		if err != nil {
			stop = b.ev.acceptFailed(idx, os.NewSyscallError("accept4", err))
			break
		}
		b.ev.accepted(idx, fd, peer)
		if b.lns[idx] != ln { // a handler stopped the listener
			return
		}
	}
	if b.lns[idx] != ln {
		return
	}
	if stop {
		ln.running = false // listen starts a new acceptor
	}
	ln.ack <- pack{stop: stop, empty: empty}
}

func (b *portableBackend) unlisten(idx uint32) {
	ln := b.lns[idx]
	if ln == nil {
		b.ev.listenerClosed(idx)
		return
	}
	b.lns[idx] = nil
	close(ln.done)
	_ = ln.f.Close()
	go func() {
		ln.wg.Wait()
		b.post(func() { b.ev.listenerClosed(idx) })
	}()
}

func (b *portableBackend) shutdown() error { return nil }
