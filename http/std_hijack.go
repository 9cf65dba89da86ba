package http

import (
	"bufio"
	"io"
	"net"
	nethttp "net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	vnet "github.com/veloq/veloq/net"
)

// hijackInCap is how much input a hijacked connection buffers for its
// reader before the loop stops reading from the client. Its Write waits
// for the client above stdOutHigh of pending output, as a FromStd
// response writer does (signalDrained).
const hijackInCap = 64 << 10

var _ nethttp.Hijacker = (*stdWriter)(nil)

// Hijack implements net/http.Hijacker: the connection leaves the HTTP
// server (its timeouts, limits, connection count and Shutdown's wait for
// requests in progress) and becomes a net.Conn for the handler's
// goroutine, with any bytes the client sent after the request (and body
// bytes not read yet) readable first. A head the handler wrote but did not
// send goes out before. The returned bufio.ReadWriter wraps the net.Conn.
//
// The net.Conn is built on the reactor: Read waits for input the loop
// posts to it (reading from the client pauses while 64 KiB wait), Write
// hands bytes to the loop and waits while the client is 256 KiB behind,
// and the deadlines bound those waits. As in net/http, Server.Shutdown
// does not wait for it (see Server.RegisterOnShutdown); Close cuts it, as
// does a Shutdown whose context ends before the requests in progress do.
func (w *stdWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.hijacked {
		return nil, nil, nethttp.ErrHijacked
	}
	if w.err != nil {
		return nil, nil, w.err
	}
	if !w.x.ex.canHijack() {
		return nil, nil, nethttp.ErrNotSupported
	}
	if w.wroteHeader && !w.streaming {
		if err := w.send(false); err != nil {
			return nil, nil, err
		}
	}
	x := w.x
	hc := &hijackedConn{c: x.c}
	hc.cond.L = &hc.mu
	errc := make(chan error, 1)
	err := x.c.Loop().Post(func() {
		c := x.c
		if !x.current() {
			errc <- net.ErrClosed
			return
		}
		x.ex.setStd(nil)
		if p := x.pipe; p != nil {
			hc.in = p.takeRest()
			p.closeWrite(nethttp.ErrHijacked)
		}
		hc.laddr, hc.raddr = c.LocalAddr(), c.RemoteAddr()
		x.ex.handOver(hc)
		// Input that waited in the connection (bytes after the request)
		// is presented to hc, then reading goes on under hc's control.
		if x.readPaused {
			c.ResumeRead()
		} else {
			c.Redeliver()
		}
		errc <- nil
	})
	if err == nil {
		err = <-errc
	}
	if err != nil {
		return nil, nil, err
	}
	w.hijacked = true
	w.err = nethttp.ErrHijacked
	return hc, bufio.NewReadWriter(bufio.NewReader(hc), bufio.NewWriter(hc)), nil
}

// takeRest removes and returns the body bytes the handler has not read,
// for the hijacked connection.
func (p *bodyPipe) takeRest() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	rest := append([]byte(nil), p.buf[p.r:]...)
	p.buf, p.r = nil, 0
	p.paused = false
	return rest
}

// hijackedConn is a connection taken over by a net/http handler: a
// net.Conn for ordinary goroutines on top of a reactor connection. The
// loop fills in and reports the connection's end (it is the connection's
// vnet.Handler); everything else crosses to the loop with Post.
type hijackedConn struct {
	c            *vnet.Conn
	laddr, raddr net.Addr

	mu     sync.Mutex
	cond   sync.Cond
	in     []byte // input for Read, from in[r:]
	r      int
	paused bool  // the loop stopped reading because in is full
	eof    bool  // the client half-closed
	gone   error // the connection closed (nil until then)
	rdl    time.Time
	rtimer *time.Timer

	wdl       atomic.Int64 // write deadline, UnixNano; 0: none
	closed    atomic.Bool  // Close was called
	writeMu   sync.Mutex   // one Write at a time, so writes do not interleave
	closeOnce sync.Once
}

var (
	_ net.Conn                        = (*hijackedConn)(nil)
	_ vnet.EOFHandler                 = (*hijackedConn)(nil)
	_ interface{ CloseWrite() error } = (*hijackedConn)(nil)
)

// OnOpen runs on the loop when the connection is handed over.
func (hc *hijackedConn) OnOpen(*vnet.Conn) {}

// OnData runs on the loop: the input goes to the reader's buffer.
func (hc *hijackedConn) OnData(c *vnet.Conn) {
	b, _ := c.Next(-1)
	hc.mu.Lock()
	if hc.r > 0 {
		k := copy(hc.in, hc.in[hc.r:]) // at most hijackInCap bytes
		hc.in, hc.r = hc.in[:k], 0
	}
	hc.in = append(hc.in, b...)
	if len(hc.in)-hc.r > hijackInCap && !hc.paused {
		hc.paused = true
		c.PauseRead()
	}
	hc.mu.Unlock()
	hc.cond.Broadcast()
}

// OnEOF runs on the loop when the client half-closed: Read returns io.EOF
// once the input is drained; writing may go on.
func (hc *hijackedConn) OnEOF(*vnet.Conn) {
	hc.mu.Lock()
	hc.eof = true
	hc.mu.Unlock()
	hc.cond.Broadcast()
}

// OnClose runs on the loop when the connection is gone.
func (hc *hijackedConn) OnClose(_ *vnet.Conn, err error) {
	if err == nil {
		err = net.ErrClosed
	}
	hc.mu.Lock()
	hc.gone = err
	hc.mu.Unlock()
	hc.cond.Broadcast()
}

// Read implements net.Conn.
func (hc *hijackedConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	hc.mu.Lock()
	for hc.r == len(hc.in) {
		switch {
		case hc.closed.Load():
			hc.mu.Unlock()
			return 0, net.ErrClosed
		case hc.eof, hc.gone != nil:
			hc.mu.Unlock()
			return 0, io.EOF
		case !hc.rdl.IsZero() && !time.Now().Before(hc.rdl):
			hc.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		}
		hc.cond.Wait()
	}
	n := copy(b, hc.in[hc.r:])
	hc.r += n
	resume := hc.paused && len(hc.in)-hc.r <= hijackInCap/2
	if resume {
		hc.paused = false
	}
	hc.mu.Unlock()
	if resume {
		c := hc.c
		_ = c.Loop().Post(func() {
			if !c.Closed() {
				c.ResumeRead()
			}
		})
	}
	return n, nil
}

// Write implements net.Conn: b is copied to the loop, and Write returns
// once the client is less than 256 KiB behind. At the write deadline it
// returns os.ErrDeadlineExceeded; the bytes are queued all the same.
func (hc *hijackedConn) Write(b []byte) (int, error) {
	hc.writeMu.Lock()
	defer hc.writeMu.Unlock()
	if hc.closed.Load() {
		return 0, net.ErrClosed
	}
	var deadline <-chan time.Time
	if dl := hc.wdl.Load(); dl != 0 {
		d := time.Until(time.Unix(0, dl))
		if d <= 0 {
			return 0, os.ErrDeadlineExceeded
		}
		t := time.NewTimer(d)
		defer t.Stop()
		deadline = t.C
	}
	p := append([]byte(nil), b...)
	c := hc.c
	errc := make(chan error, 1)
	err := c.Loop().Post(func() {
		if c.Closed() {
			errc <- net.ErrClosed
			return
		}
		c.Write(p)
		whenDrained(c, func(err error) { errc <- err })
	})
	if err != nil {
		return 0, net.ErrClosed
	}
	select {
	case err = <-errc:
	case <-deadline:
		return len(b), os.ErrDeadlineExceeded
	}
	if err != nil {
		return 0, err
	}
	return len(b), nil
}

// Close implements net.Conn: the connection closes once its pending
// output is sent.
func (hc *hijackedConn) Close() error {
	err := net.ErrClosed
	hc.closeOnce.Do(func() {
		err = nil
		hc.closed.Store(true)
		hc.cond.Broadcast()
		c := hc.c
		_ = c.Loop().Post(func() {
			if !c.Closed() {
				c.Close()
			}
		})
		hc.mu.Lock()
		if hc.rtimer != nil {
			hc.rtimer.Stop()
		}
		hc.mu.Unlock()
	})
	return err
}

// CloseWrite half-closes the connection after its pending output, like
// net.TCPConn's.
func (hc *hijackedConn) CloseWrite() error {
	if hc.closed.Load() {
		return net.ErrClosed
	}
	c := hc.c
	errc := make(chan error, 1)
	if err := c.Loop().Post(func() { errc <- c.CloseWrite() }); err != nil {
		return net.ErrClosed
	}
	return <-errc
}

// LocalAddr implements net.Conn.
func (hc *hijackedConn) LocalAddr() net.Addr { return hc.laddr }

// RemoteAddr implements net.Conn.
func (hc *hijackedConn) RemoteAddr() net.Addr { return hc.raddr }

// SetDeadline implements net.Conn.
func (hc *hijackedConn) SetDeadline(t time.Time) error {
	hc.SetReadDeadline(t)
	return hc.SetWriteDeadline(t)
}

// SetReadDeadline implements net.Conn: a Read waiting at t returns
// os.ErrDeadlineExceeded.
func (hc *hijackedConn) SetReadDeadline(t time.Time) error {
	hc.mu.Lock()
	hc.rdl = t
	if hc.rtimer != nil {
		hc.rtimer.Stop()
		hc.rtimer = nil
	}
	if !t.IsZero() {
		hc.rtimer = time.AfterFunc(time.Until(t), func() {
			hc.mu.Lock()
			hc.cond.Broadcast()
			hc.mu.Unlock()
		})
	}
	hc.mu.Unlock()
	hc.cond.Broadcast()
	return nil
}

// SetWriteDeadline implements net.Conn.
func (hc *hijackedConn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		hc.wdl.Store(0)
	} else {
		hc.wdl.Store(t.UnixNano())
	}
	return nil
}
