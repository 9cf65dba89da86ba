package net

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/veloq/veloq/internal/sock"
)

// listener is a listening socket driven by one loop.
type listener struct {
	fd       int
	idx      uint32
	network  string
	addr     net.Addr
	h        Handler
	dispatch func() *Loop // nil: accepted connections stay on this loop
	closing  bool
	backoff  time.Duration
	retry    *Timer
	closed   chan struct{}
	closeErr error // from close(2), read after closed is closed
	// unlink is the path of a Unix socket this server bound itself, removed
	// once the socket is closed, as net.UnixListener does: the file outlives
	// the socket, and a stale one makes the next bind fail with
	// EADDRINUSE. Empty for a socket handed in by the caller, whose file
	// is the caller's to manage (like net.FileListener).
	unlink string
}

// Listener is part of the engine: the handle Loop.AddListener returns.
// A Server's listeners are managed by the Server.
type Listener struct {
	ln   *listener
	loop *Loop
}

// Addr returns the address the listener is bound to.
func (h *Listener) Addr() net.Addr { return h.ln.addr }

// Close stops accepting on this listener and closes its socket; it waits
// until the loop has released it, and returns the error closing the socket
// met (the same on every call).
func (h *Listener) Close() error {
	_ = h.loop.Post(func() { h.loop.closeListener(h.ln) }) // ErrClosed: the stopping loop closes it
	<-h.ln.closed
	return h.ln.closeErr
}

// Done returns a channel that is closed once the listener's socket is
// closed (by Close, or by its loop stopping), as a context's Done is.
// (Conn.Closed, by contrast, reports a connection's state as a bool.)
func (h *Listener) Done() <-chan struct{} { return h.ln.closed }

// AddListener is part of the engine, for code that makes its own listening
// sockets (a Server listens with Listen): it hands a listening socket to
// the loop, which accepts on it and
// serves every accepted connection with h. dispatch, if not nil, chooses
// the loop each accepted connection goes to (one-acceptor balancing); the
// loop owns fd from here on. Safe from any goroutine.
func (l *Loop) AddListener(fd int, network string, h Handler, dispatch func() *Loop) (*Listener, error) {
	return l.addListener(fd, network, h, dispatch, "")
}

// addListener is AddListener for a socket bound to the Unix path unlink
// (empty: none to remove), which is removed once the socket is closed.
func (l *Loop) addListener(fd int, network string, h Handler, dispatch func() *Loop, unlink string) (*Listener, error) {
	addr, err := sock.LocalAddr(fd)
	if err != nil {
		return nil, err
	}
	ln := &listener{fd: fd, network: network, addr: addr, h: h, dispatch: dispatch, closed: make(chan struct{}), unlink: unlink}
	errc := make(chan error, 1)
	if err := l.Post(func() {
		if l.stopping {
			errc <- ErrClosed
			return
		}
		ln.idx = uint32(len(l.listeners))
		for i, x := range l.listeners {
			if x == nil {
				ln.idx = uint32(i)
				break
			}
		}
		if int(ln.idx) == len(l.listeners) {
			l.listeners = append(l.listeners, ln)
		} else {
			l.listeners[ln.idx] = ln
		}
		if err := l.be.listen(ln.idx, ln.fd); err != nil {
			l.listeners[ln.idx] = nil
			errc <- err
			return
		}
		errc <- nil
	}); err != nil {
		return nil, err
	}
	if err := <-errc; err != nil {
		return nil, err
	}
	return &Listener{ln: ln, loop: l}, nil
}

// closeListener starts closing ln; the backend reports listenerClosed when
// the kernel no longer holds an accept for it.
func (l *Loop) closeListener(ln *listener) {
	if ln.closing {
		return
	}
	ln.closing = true
	ln.retry.Stop()
	l.be.unlisten(ln.idx)
}

func (l *Loop) closedListener(ln *listener) {
	if err := closeFD(ln.fd); err != nil {
		ln.closeErr = os.NewSyscallError("close", err)
	}
	if ln.unlink != "" {
		// Like net.UnixListener, ignore the error: the file may have been
		// removed or replaced by someone else, and either way the socket
		// is closed.
		_ = syscall.Unlink(ln.unlink)
	}
	if int(ln.idx) < len(l.listeners) && l.listeners[ln.idx] == ln {
		l.listeners[ln.idx] = nil
	}
	close(ln.closed)
}

// onAccept places a newly accepted fd.
func (l *Loop) onAccept(ln *listener, fd int, peer sock.Peer) {
	ln.backoff = 0
	if ln.closing || l.stopping {
		closeFD(fd)
		return
	}
	target := l
	if ln.dispatch != nil {
		target = ln.dispatch()
	}
	if target == l {
		l.register(fd, peer, ln, false)
		return
	}
	// Count the connection on its target now, so least-connections
	// placement sees it before the target loop gets to it.
	target.nconn.Add(1)
	if err := target.Post(func() { target.register(fd, peer, ln, true) }); err != nil {
		target.nconn.Add(-1)
		closeFD(fd)
	}
}

// acceptBackOff handles an accept error. Running out of descriptors or
// memory backs off (10 ms doubling to 1 s) instead of spinning, logged at
// most once a second; connections already open keep being served.
// It returns true when the backend should stop accepting: the loop calls
// listen again when the back-off ends.
func (l *Loop) acceptBackOff(ln *listener, err error) bool {
	switch {
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR), errors.Is(err, syscall.ECONNABORTED):
		return false
	}
	l.stats.acceptErrs.Add(1)
	if ln.backoff == 0 {
		ln.backoff = 10 * time.Millisecond
	} else if ln.backoff < time.Second {
		ln.backoff *= 2
	}
	if now := l.clock(); now-l.lastAcceptLog >= int64(time.Second) {
		l.lastAcceptLog = now
		l.log.Warn("veloq: accept failed; backing off", "addr", ln.addr.String(), "err", err, "retry_in", ln.backoff)
	}
	ln.retry = l.AfterFunc(ln.backoff, func() {
		if !ln.closing {
			if err := l.be.listen(ln.idx, ln.fd); err != nil {
				l.log.Warn("veloq: resuming accept", "addr", ln.addr.String(), "err", err)
			}
		}
	})
	return true
}

// Dial connects to address on this loop and serves the connection with h.
//
// Called on the loop (in a handler, a timer or a Post closure), it never
// blocks, which is what a proxy's handler needs: it returns the Conn at
// once; h.OnOpen runs when the connect completes, or h.OnClose with the
// error when it fails or ctx's deadline passes first (ErrDialTimeout).
// Writes made before the connect completes are sent after it. There ctx
// is read once, for its deadline: with none the connect has no timeout of
// its own (the kernel's SYN retries bound it), and cancelling ctx later
// does not stop it (Abort the Conn does).
//
// Called from any other goroutine, it runs the connect on the loop and
// waits until the connection is established or failed, or ctx ends,
// which aborts the connect.
//
// Either way a ctx that has already ended fails at once with its error.
// Host names are resolved with the Go resolver, on the loop (blocking it):
// pass numeric addresses.
func (l *Loop) Dial(ctx context.Context, network, address string, h Handler) (*Conn, error) {
	timeout, err := dialTimeout(ctx)
	if err != nil {
		return nil, err
	}
	if l.InLoop() {
		return l.dial(network, address, h, timeout)
	}
	return l.dialWait(ctx, func() (*Conn, error) { return l.dial(network, address, h, timeout) })
}

// dialTimeout returns the time left until ctx's deadline (0: none), or
// ctx's error when it has already ended.
func dialTimeout(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, nil
	}
	timeout := time.Until(dl)
	if timeout <= 0 {
		return 0, context.DeadlineExceeded
	}
	return timeout, nil
}

// dial starts a connect on the loop; it fails with ErrDialTimeout when it
// is not done within timeout (0: no timeout).
func (l *Loop) dial(network, address string, h Handler, timeout time.Duration) (*Conn, error) {
	if l.stopping {
		return nil, ErrClosed
	}
	a, err := sock.Resolve(network, address)
	if err != nil {
		return nil, err
	}
	fd, err := sock.Socket(a.Family)
	if err != nil {
		return nil, err
	}
	c := l.newConn(fd, network, h)
	c.connecting = true
	c.setPeer(a.Net)
	l.stats.dialed.Add(1)
	if err := l.be.open(c.slot, fd, &c.out, a.SA); err != nil {
		closeFD(fd)
		l.forget(c)
		return nil, err
	}
	if timeout > 0 {
		c.more().dialTimer = l.AfterFunc(timeout, func() { l.dialTimedOut(c) })
	}
	return c, nil
}

// dialTimedOut aborts c's connect when its timeout is due, unless the
// kernel has finished it: then the completion is on its way and only the
// loop is late to report it. A busy loop reads its events seconds behind
// them (timers run first in each iteration), and a timeout bounds the
// connect, not the loop: in the proxy's 1000-stream test at load 10 on 2
// cores, backend connects that TCP_INFO showed established within
// milliseconds were still unreported when their 5 s timer fired, up to
// 352 of them per run were aborted as timed out, and their clients were
// reset.
func (l *Loop) dialTimedOut(c *Conn) {
	if !c.connecting || c.state != connOpen || sock.Connected(c.fd) {
		return
	}
	l.abort(c, ErrDialTimeout)
}

// onConnected finishes a dial.
func (l *Loop) onConnected(c *Conn, err error) {
	if !c.connecting || c.state >= connTearingDown {
		return
	}
	if err != nil {
		ra := c.RemoteAddr()
		l.abort(c, &net.OpError{Op: "dial", Net: ra.Network(), Addr: ra, Err: err})
		return
	}
	c.connecting = false
	if c.aux != nil {
		c.aux.dialTimer.Stop()
	}
	c.laddr, _ = sock.LocalAddr(c.fd) // the peer was set by Dial
	l.configure(c)
	if c.state != connOpen {
		if c.out.len() > 0 {
			l.wrote(c) // Close while connecting: the output still goes first
		}
		return
	}
	if x := c.aux; x != nil && x.onConnect != nil && c.tls == nil { // TLS: at the hand-over
		fn := x.onConnect
		x.onConnect = nil
		fn(nil)
	}
	l.open(c)
	if c.out.len() > 0 {
		l.wrote(c) // writes made while connecting
	}
}

// dialWait runs dial on the loop and waits for the connection it starts
// to be established, or to fail, or for ctx to end.
func (l *Loop) dialWait(ctx context.Context, dial func() (*Conn, error)) (*Conn, error) {
	type result struct {
		c   *Conn
		err error
	}
	ch := make(chan result, 1)
	var pending *Conn // loop-owned
	if err := l.Post(func() {
		c, err := dial()
		if err != nil {
			ch <- result{nil, err}
			return
		}
		pending = c
		c.more().onConnect = func(err error) {
			if err != nil {
				ch <- result{nil, err}
				return
			}
			ch <- result{c, nil}
		}
	}); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r.c, r.err
	case <-ctx.Done():
		_ = l.Post(func() {
			if pending != nil && pending.state == connOpen {
				pending.more().onConnect = nil
				l.abort(pending, ctx.Err())
			}
		})
		return nil, ctx.Err()
	}
}
