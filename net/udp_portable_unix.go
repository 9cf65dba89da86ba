//go:build unix

package net

import (
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ppkt is the portable backend's record of one datagram socket: a
// goroutine waits through the runtime's poller for input and reports it
// ready; the loop reads (recvmmsg) and writes itself, as on epoll.
type ppkt struct {
	fd    int
	pc    net.PacketConn // net's duplicate of fd, for the poller
	rc    syscall.RawConn
	grant chan struct{} // the loop took the last report: wait again
	done  chan struct{}
	out   bool // an output watch is waiting
	wg    sync.WaitGroup
}

func (b *portableBackend) openPacket(idx uint32, fd int, _ packetRecv) error {
	for int(idx) >= len(b.pkts) {
		b.pkts = append(b.pkts, nil)
	}
	var pc net.PacketConn
	if err := withFile(fd, func(f *os.File) (err error) { pc, err = net.FilePacketConn(f); return err }); err != nil {
		return err
	}
	p := &ppkt{fd: fd, pc: pc, grant: make(chan struct{}, 1), done: make(chan struct{})}
	if err := rawConn(pc, func(rc syscall.RawConn) error { p.rc = rc; return nil }); err != nil {
		_ = pc.Close()
		return err
	}
	b.pkts[idx] = p
	p.wg.Add(1)
	go b.packetWaiter(idx, p)
	return nil
}

// packetWaiter reports idx ready whenever a datagram (or a queued error)
// waits, then waits for the loop to have read before it looks again. The
// poller's readiness is reset when a wait begins, so each wait first
// peeks: a datagram that came in between is not missed.
func (b *portableBackend) packetWaiter(idx uint32, p *ppkt) {
	defer p.wg.Done()
	for {
		var peekErr error
		err := p.rc.Read(func(fd uintptr) bool {
			_, _, peekErr = unix.Recvfrom(int(fd), nil, unix.MSG_PEEK|unix.MSG_DONTWAIT)
			return peekErr != syscall.EAGAIN
		})
		if err != nil { // closed
			return
		}
		// A queued error (ECONNREFUSED on a connected socket) is taken by
		// the peek, even with MSG_PEEK: it is reported here, since the
		// loop's receive will not see it.
		errno, _ := peekErr.(syscall.Errno)
		b.post(func() {
			if b.pkts[idx] == p {
				if errno != 0 {
					b.ev.packetError(idx, errno)
				} else {
					b.ev.packetReady(idx, false)
				}
			}
			p.grant <- struct{}{}
		})
		select {
		case <-p.grant:
		case <-p.done:
			return
		}
	}
}

func (b *portableBackend) packetRead([]byte) {}

func (b *portableBackend) watchPacketOut(idx uint32) {
	p := b.pkts[idx]
	if p == nil || p.out {
		return
	}
	p.out = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		err := p.rc.Write(func(fd uintptr) bool {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			n, err := unix.Poll(pfd, 0)
			return err == nil && n > 0
		})
		if err != nil {
			return
		}
		b.post(func() {
			if b.pkts[idx] == p && p.out {
				p.out = false
				b.ev.packetReady(idx, true)
			}
		})
	}()
}

// interrupt ends the waiter's wait: it closes net's duplicate.
func (p *ppkt) interrupt() { _ = p.pc.Close() }

// forget has nothing to drop here.
func (p *ppkt) forget() {}
