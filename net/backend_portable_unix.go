//go:build unix

package net

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/internal/sock"
)

// The portable backend's sockets on unix: the loop makes them, and net
// wraps a duplicate of each (net.FileConn); the acceptor waits for
// readiness and the loop accepts. backend_portable_windows.go is the
// other way round.

type plisten struct {
	fd      int
	f       *os.File // a pollable duplicate of fd
	rc      syscall.RawConn
	running bool          // an accept goroutine is running
	ack     chan pack     // the loop's answer to a batch
	done    chan struct{} // closed by unlisten
	wg      sync.WaitGroup
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

func (b *portableBackend) open(slot uint32, fd int, q *outQueue, dial sockaddr) error {
	for int(slot) >= len(b.conns) {
		b.conns = growTable(b.conns, nil)
	}
	if dial != nil {
		if err := unix.Connect(fd, dial); err != nil && !errors.Is(err, syscall.EINPROGRESS) {
			return os.NewSyscallError("connect", err)
		}
	}
	var nc net.Conn
	opts := saveSockOpts(fd)
	if err := withFile(fd, func(f *os.File) (err error) { nc, err = net.FileConn(f); return err }); err != nil {
		return err
	}
	opts.restore(fd)
	p := newPconn(fd, q)
	p.nc = nc
	b.conns[slot] = p
	b.run(slot, p)
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
			b.readLater(slot, p) // input that came with the connect
		}
	})
}

// portableReadSize is the loop's receive buffer, as epoll's: one per
// loop, so it can be large.
const portableReadSize = 64 << 10

// preader is the reading half of a connection on unix: a watcher
// goroutine waits in the runtime's poller for input and reports it; the
// loop reads it itself. The connection holds no buffer, and a burst of
// input costs the watcher one wake-up and the loop one queue report, where
// a reader goroutine doing the reads cost two goroutine switches, a
// channel hand-off, a report allocated and a deadline reset per read
// (callgrind, tcpload -conns 64 -size 64 against echo-server -loops 1
// -backend portable: 5,892 user-space instructions per echo before, 2,790
// after; Go's net echo 1,728).
type preader struct {
	// readable: input may wait (the loop has seen no EAGAIN since the
	// last report); the loop's.
	readable bool
	// posted: a report is queued, or the loop holds one back while it is
	// not reading. The watcher reports only when it is unset, and the loop
	// unsets it just before it reads to EAGAIN, so every arrival after
	// that read's start raises a report of its own.
	posted atomic.Bool
	report func() // the report, made once per connection
}

// init: no input is read until setReading, and the first read is
// tried then, since input may have come before the watcher began.
func (r *preader) init() {
	r.readable = true
	r.posted.Store(true)
}

// run starts p's watcher; p.nc is set.
func (b *portableBackend) run(slot uint32, p *pconn) {
	p.report = func() {
		p.readable = true
		b.read(slot, p)
	}
	p.wg.Add(1)
	go b.watcher(p)
}

// watcher reports p readable each time the poller says so, until close
// closes net's descriptor. It stays in one RawConn.Read for the
// connection's life: a new RawConn.Read would forget readiness the
// poller saw before it, but within one every edge after the last call of
// the function makes it run again (edge-triggered, as epoll: a new
// arrival is a new edge), so nothing needs to be read here.
func (b *portableBackend) watcher(p *pconn) {
	defer p.wg.Done()
	_ = rawConn(p.nc, func(rc syscall.RawConn) error {
		return rc.Read(func(uintptr) bool {
			if p.posted.CompareAndSwap(false, true) {
				b.post(p.report)
			}
			return false
		})
	})
}

// canRead says whether the loop takes slot's input now.
func (b *portableBackend) canRead(slot uint32, p *pconn) bool {
	return b.live(slot, p) && p.want && !p.eof && !p.connecting
}

// read takes slot's input on the loop until EAGAIN (a FIN that came
// with the data raises no report of its own, and the watcher cannot tell
// it apart, so a short read is not taken for drained as on epoll), at
// most maxReadsOnce reads in one go.
func (b *portableBackend) read(slot uint32, p *pconn) {
	if !b.canRead(slot, p) || !p.readable {
		return // posted stays set: setReading or the connect reads later
	}
	p.posted.Store(false)
	if b.readBuf == nil {
		b.readBuf = make([]byte, portableReadSize)
	}
	for i := 0; ; i++ {
		if i == maxReadsOnce {
			b.later(p.report)
			return
		}
		n, err := sock.RawRead(p.fd, b.readBuf)
		switch {
		case err == syscall.EAGAIN:
			p.readable = false
			return
		case err == syscall.EINTR:
			continue
		case err != nil:
			b.ev.failed(slot, os.NewSyscallError("read", err))
			return
		case n == 0:
			p.eof = true
			b.ev.eof(slot)
			return
		}
		b.ev.input(slot, b.readBuf[:n], -1)
		if !b.canRead(slot, p) {
			return
		}
	}
}

// readLater reads slot's input on the next poll if some may wait: not
// from inside the call that turned reading on, which a handler makes.
func (b *portableBackend) readLater(slot uint32, p *pconn) {
	if b.canRead(slot, p) && p.readable {
		b.later(p.report)
	}
}

func (b *portableBackend) setReading(slot uint32, on bool) {
	p := b.conns[slot]
	p.want = on
	if on {
		b.readLater(slot, p)
	}
}

// pace needs nothing: the loop reads one buffer at a time, and stops as
// soon as it no longer wants input.
func (b *portableBackend) pace(uint32) {}

func (b *portableBackend) recycle(uint16) {} // reads land in the loop's buffer: nothing is kept

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
	b.startAcceptor(idx, ln)
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
		if err == syscall.EAGAIN {
			empty = true
			break
		}
		if err != nil {
			stop = b.ev.acceptFailed(idx, os.NewSyscallError("accept4", err))
			break
		}
		b.ev.accepted(idx, fd, sock.Peer{Addr: peer})
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

// interrupt ends the acceptor's wait: it closes the pollable duplicate.
func (ln *plisten) interrupt() { _ = ln.f.Close() }
