//go:build windows

package net

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/veloq/veloq/internal/sock"
)

// The portable backend's sockets on Windows: net made them (net.FileConn
// does not exist here, see internal/sock), so the backend looks each
// handle's net value up instead of wrapping a descriptor; a dial runs
// net.Dial on a goroutine, and the acceptor takes connections with a
// blocking Accept. The reads and writes are the shared code's.

type plisten struct {
	fd      int
	ln      net.Listener
	running bool          // an accept goroutine is running
	ack     chan pack     // the loop's answer to a connection
	done    chan struct{} // closed by unlisten
	wg      sync.WaitGroup
}

func (b *portableBackend) open(slot uint32, fd int, q *outQueue, dial sockaddr) error {
	for int(slot) >= len(b.conns) {
		b.conns = growTable(b.conns, nil)
	}
	p := newPconn(fd, q)
	if dial == nil {
		nc, ok := sock.Get(fd).(net.Conn)
		if !ok {
			return fmt.Errorf("veloq: portable backend: handle %d is not a connection", fd)
		}
		p.nc = nc
		b.conns[slot] = p
		b.run(slot, p)
		return nil
	}
	// The reader and writer start once the dial is done; connected is
	// reported from the goroutine's post, so never from inside Dial.
	p.connecting = true
	b.conns[slot] = p
	p.wg.Add(1)
	go b.connect(slot, p, dial)
	return nil
}

// connect dials for p; close ends a dial under way.
func (b *portableBackend) connect(slot uint32, p *pconn, to sockaddr) {
	defer p.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	nc, err := sock.Connect(ctx, p.fd, to)
	b.post(func() {
		if !b.live(slot, p) || !p.connecting {
			return // closed: the handle (and nc behind it) goes with released
		}
		p.connecting = false
		if err == nil {
			p.nc = nc
			b.run(slot, p)
		}
		b.ev.connected(slot, err)
		if err == nil && b.live(slot, p) {
			b.grantRead(p) // reading may have been turned on during the dial
		}
	})
}

func (b *portableBackend) listen(idx uint32, fd int) error {
	for int(idx) >= len(b.lns) {
		b.lns = append(b.lns, nil)
	}
	ln := b.lns[idx]
	if ln == nil || ln.fd != fd {
		nl, ok := sock.Get(fd).(net.Listener)
		if !ok {
			return fmt.Errorf("veloq: portable backend: handle %d is not a listener", fd)
		}
		ln = &plisten{fd: fd, ln: nl, ack: make(chan pack, 1), done: make(chan struct{})}
		b.lns[idx] = ln
	}
	b.startAcceptor(idx, ln)
	return nil
}

// acceptor takes one connection at a time with a blocking Accept (IOCP
// has no readiness to wait for without taking it) and hands it to the
// loop, then waits for the loop's answer before it accepts again, so at
// most one connection is ahead of the loop. Unlike on unix, that one is
// out of the kernel's queue: if the listener stops, it is closed (the
// peer sees a reset), where unix leaves it queued for a hot upgrade's
// next process, which Windows does not have.
func (b *portableBackend) acceptor(idx uint32, ln *plisten) {
	defer ln.wg.Done()
	for {
		h, peer, err := sock.Accept(ln.fd)
		select {
		case <-ln.done:
			if err == nil {
				_ = sock.Close(h)
			}
			return
		default:
		}
		b.post(func() { b.accepted(idx, ln, h, peer, err) })
		select {
		case a := <-ln.ack:
			if a.stop {
				return
			}
		case <-ln.done:
			return // accepted closes a connection the loop did not take
		}
	}
}

// accepted reports, on the loop, the connection (or error) the acceptor
// took, and answers it.
func (b *portableBackend) accepted(idx uint32, ln *plisten, h int, peer net.Addr, err error) {
	if b.lns[idx] != ln {
		if err == nil {
			_ = sock.Close(h)
		}
		return
	}
	stop := false
	if err != nil {
		stop = b.ev.acceptFailed(idx, fmt.Errorf("veloq: accept: %w", err))
	} else {
		b.ev.accepted(idx, h, sock.Peer{Addr: peer})
		if b.lns[idx] != ln { // a handler stopped the listener
			return
		}
	}
	if stop {
		ln.running = false // listen starts a new acceptor
	}
	ln.ack <- pack{stop: stop}
}

// interrupt ends a waiting Accept; the handle itself is closed by the
// loop after listenerClosed, as a descriptor is elsewhere.
func (ln *plisten) interrupt() { _ = ln.ln.Close() }

// portableReadSize is each connection's receive buffer on Windows:
// net/http's bufio reader is 4 KiB; 16 KiB keeps a bulk transfer at a
// few reads per TLS record-sized chunk while idle connections stay cheap.
const portableReadSize = 16 << 10

// preader is the reading half of a connection on Windows: a reader
// goroutine does a blocking Read into its own buffer when the loop grants
// it one, and hands the bytes over; the next read is granted only once
// the loop has taken them, so at most one buffer per connection is ahead
// of the handler (pace is the default), and setReading(false) interrupts
// a waiting Read with a past read deadline. (IOCP reports a read done,
// not a socket ready, so the loop cannot read for itself as on unix.)
type preader struct {
	busy  bool          // a read is granted and not yet reported
	mu    sync.Mutex    // guards want against the reader
	grant chan struct{} // one token per read the loop allows
}

func (r *preader) init() { r.grant = make(chan struct{}, 1) }

// run starts p's reader; p.nc is set. The writer starts with the first
// write (every write goes through it here: rawWritev answers EAGAIN).
func (b *portableBackend) run(slot uint32, p *pconn) {
	p.wg.Add(1)
	go b.reader(slot, p)
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

// grantRead lets the reader read once. Not before a dial is done (nc is
// set then, and the connect's report grants the read).
func (b *portableBackend) grantRead(p *pconn) {
	if p.busy || p.eof || p.closed || !p.want || p.nc == nil {
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
