package net

import (
	"fmt"
	"os"
	"syscall"

	"github.com/veloq/veloq/internal/panicstack"
)

// The loop's side of datagram sockets: the table of its sockets, the
// receive batch they share, the per-iteration flush, and closing.

// udpLoop is a loop's datagram state.
type udpLoop struct {
	socks []*PacketConn // by idx; nil once released
	free  []uint32
	open  int // registered and not yet released
	dirty []*PacketConn
	again []*PacketConn // input left unread by a full batch
	rx    *rxBatch
}

// rxBatch is the loop's receive batch: one buffer, peer address and
// control buffer per message. Handlers run inline and are done with a
// datagram before the next receive, so every socket of the loop shares it.
type rxBatch struct {
	size  int // bytes per buffer
	hdrs  []mmsghdr
	iovs  []iovec
	bufs  []byte
	names []byte
	ctl   []byte
}

func newRxBatch(n, size int) *rxBatch {
	r := &rxBatch{
		size:  size,
		hdrs:  make([]mmsghdr, n),
		iovs:  make([]iovec, n),
		bufs:  make([]byte, n*size),
		names: make([]byte, n*sockaddrLen),
		ctl:   make([]byte, n*groCmsgSpace),
	}
	for i := range r.hdrs {
		r.iovs[i].Base = &r.bufs[i*size]
		r.iovs[i].SetLen(size)
		h := &r.hdrs[i].Hdr
		h.Name = &r.names[i*sockaddrLen]
		h.Iov = &r.iovs[i]
		h.Iovlen = 1
		h.Control = &r.ctl[i*groCmsgSpace]
	}
	return r
}

// reset prepares the first n headers for a receive (the kernel overwrote
// the lengths and flags).
func (r *rxBatch) reset(n int, gro bool) {
	for i := range r.hdrs[:n] {
		h := &r.hdrs[i].Hdr
		h.Namelen = sockaddrLen
		h.Flags = 0
		h.Controllen = 0
		if gro {
			h.SetControllen(groCmsgSpace)
		}
		r.hdrs[i].Len = 0
	}
}

// addPacket registers pc on the loop; on the loop.
func (l *Loop) addPacket(pc *PacketConn) error {
	if l.stopping {
		return ErrClosed
	}
	var idx uint32
	if n := len(l.udp.free); n > 0 {
		idx = l.udp.free[n-1]
		l.udp.free = l.udp.free[:n-1]
	} else {
		idx = uint32(len(l.udp.socks))
		l.udp.socks = append(l.udp.socks, nil)
	}
	pc.idx = idx
	l.udp.socks[idx] = pc
	l.udp.open++
	if err := l.be.openPacket(idx, pc.fd, packetRecv{bufSize: pc.cfg.bufSize, gro: pc.gro, batch: pc.cfg.batch}); err != nil {
		l.udp.socks[idx] = nil
		l.udp.free = append(l.udp.free, idx)
		l.udp.open--
		return fmt.Errorf("veloq: registering a datagram socket: %w", err)
	}
	return nil
}

// packetReady is the backend's report that pc has input or room.
func (l *Loop) packetReady(idx uint32, out bool) {
	l.tick()
	pc := l.udp.socks[idx]
	if pc == nil || pc.closing {
		return
	}
	if out {
		pc.waitOut = false
		l.sendPackets(pc)
		return
	}
	l.receivePackets(pc)
}

// packetClosed is the backend's report that pc's descriptor is closed.
func (l *Loop) packetClosed(idx uint32) {
	pc := l.udp.socks[idx]
	l.udp.socks[idx] = nil
	l.udp.free = append(l.udp.free, idx)
	l.udp.open--
	pc.out, pc.msgs, pc.tx = nil, nil, nil
	close(pc.done)
}

// maxRecvRounds bounds the recvmmsg calls per readiness report, so one
// flooded socket does not starve the loop's other work; what it leaves is
// read in the next iteration.
const maxRecvRounds = 4

// receivePackets reads pc's datagrams in batches and hands each to its
// handler, until the socket is empty or maxRecvRounds batches were full.
func (l *Loop) receivePackets(pc *PacketConn) {
	r := l.udp.rx
	if r == nil || r.size < pc.cfg.bufSize || len(r.hdrs) < pc.cfg.batch {
		// Made on the first receive, not at registration: the io_uring
		// backend receives into its own buffers and never needs it.
		n, size := pc.cfg.batch, pc.cfg.bufSize
		if r != nil {
			n, size = max(n, len(r.hdrs)), max(size, r.size)
		}
		r = newRxBatch(n, size)
		l.udp.rx = r
	}
	n := min(pc.cfg.batch, len(r.hdrs))
	for round := 0; round < maxRecvRounds; round++ {
		r.reset(n, pc.gro)
		got, e := mmsg(true, pc.fd, r.hdrs[:n])
		switch {
		case e == syscall.EAGAIN:
			return
		case e == syscall.EINTR:
			round--
			continue
		case e != 0:
			pc.recvError(l, e)
			if e != syscall.ECONNREFUSED {
				return // the next report tries again
			}
			continue
		}
		for i := 0; i < got; {
			i = l.deliverPackets(pc, r, i, got)
		}
		if pc.closing || got < n {
			return
		}
	}
	if !pc.again {
		pc.again = true
		l.udp.again = append(l.udp.again, pc)
	}
	l.more = true
}

// deliverPackets hands datagrams i..n of the batch to pc's handler and
// returns n, or the index after one whose handler panicked.
func (l *Loop) deliverPackets(pc *PacketConn, r *rxBatch, i, n int) (next int) {
	next = i
	var c rxCount
	outer := l.enterUser()
	defer func() {
		if l.leavePacketHandler(pc, outer, recover(), &c) {
			next++
		}
	}()
	for ; next < n && !pc.closing; next++ {
		h := &r.hdrs[next]
		p := r.bufs[next*r.size : next*r.size+int(h.Len)]
		ctl := r.ctl[next*groCmsgSpace : next*groCmsgSpace+min(int(h.Hdr.Controllen), groCmsgSpace)]
		name := r.names[next*sockaddrLen : next*sockaddrLen+min(int(h.Hdr.Namelen), sockaddrLen)]
		l.be.packetRead(name)
		l.handlePacket(pc, p, name, ctl, uint32(h.Hdr.Flags), &c)
	}
	return n
}

// packetInput is the backend's report of one datagram for pc.
func (l *Loop) packetInput(idx uint32, p, name, ctl []byte, flags uint32) {
	l.tick()
	pc := l.udp.socks[idx]
	if pc == nil || pc.closing {
		return
	}
	var c rxCount
	outer := l.enterUser()
	defer func() { l.leavePacketHandler(pc, outer, recover(), &c) }()
	l.handlePacket(pc, p, name, ctl, flags, &c)
}

// packetError is the backend's report of a failed receive on pc.
func (l *Loop) packetError(idx uint32, e syscall.Errno) {
	l.tick()
	if pc := l.udp.socks[idx]; pc != nil {
		pc.recvError(l, e)
	}
}

// recvError counts a failed receive; the socket goes on.
func (pc *PacketConn) recvError(l *Loop, e syscall.Errno) {
	pc.stats.errors.Add(1)
	if e == syscall.ECONNREFUSED {
		// A connected socket's peer answered an earlier datagram with port
		// unreachable; the receive that returns the error consumes it.
		pc.stats.refused.Add(1)
		return
	}
	l.log.Debug("veloq: datagram receive failed", "local", pc.local.String(), "err", os.NewSyscallError("recvmsg", e))
}

// rxCount gathers a delivery's counters, added to the socket's once.
type rxCount struct{ received, bytes, gro uint64 }

// leavePacketHandler ends the user call deliverPackets or packetInput
// entered: it adds the counters, and logs and counts a panic rec (the
// datagram is lost, the socket goes on). It reports whether there was one.
func (l *Loop) leavePacketHandler(pc *PacketConn, outer bool, rec any, c *rxCount) bool {
	if outer {
		l.leaveUser(func() string { return fmt.Sprintf("OnPacket of %T", pc.h) })
	}
	// Received last: a reader that sees it reach a count sees those
	// datagrams' bytes and GRO receives too.
	pc.stats.bytesIn.Add(c.bytes)
	pc.stats.groReceives.Add(c.gro)
	pc.stats.received.Add(c.received)
	l.ctr.bytesIn += c.bytes
	if rec == nil {
		return false
	}
	pc.stats.panics.Add(1)
	l.logPanic("OnPacket", fmt.Sprintf("%T", pc.h), "dropping its datagram", rec, panicstack.Capture())
	return true
}

// handlePacket hands one received datagram to pc's handler, or each
// datagram of a GRO run: name is the sender's address as the kernel wrote
// it, ctl the control messages, flags msg_flags. A truncated datagram is
// counted and dropped.
func (l *Loop) handlePacket(pc *PacketConn, p, name, ctl []byte, flags uint32, c *rxCount) {
	if flags&msgTrunc != 0 {
		pc.stats.truncated.Add(1)
		return
	}
	from := pc.peer
	if !from.IsValid() {
		from = getSockaddr(name, uint32(len(name)))
	}
	pc.cur = name
	defer func() { pc.cur = nil }()
	seg := 0
	if pc.gro && len(ctl) > 0 {
		seg = groSegment(ctl, len(ctl))
	}
	if seg <= 0 || seg >= len(p) {
		c.received++
		c.bytes += uint64(len(p))
		pc.h.OnPacket(pc, p, from)
		return
	}
	c.gro++
	for len(p) > 0 && !pc.closing {
		k := min(seg, len(p))
		c.received++
		c.bytes += uint64(k)
		pc.h.OnPacket(pc, p[:k:k], from)
		p = p[k:]
	}
}

// flushPackets runs once per loop iteration, before the connections'
// flush: it goes back to sockets whose input a full batch left unread,
// then sends what every socket queued meanwhile, one batch each.
func (l *Loop) flushPackets() {
	if len(l.udp.again) > 0 {
		again := l.udp.again
		l.udp.again = nil
		for _, pc := range again {
			pc.again = false
			if !pc.closing {
				l.receivePackets(pc)
			}
		}
	}
	for i := 0; i < len(l.udp.dirty); i++ {
		pc := l.udp.dirty[i]
		l.udp.dirty[i] = nil
		pc.dirty = false
		if !pc.closing && !pc.waitOut {
			l.sendPackets(pc)
		}
	}
	l.udp.dirty = l.udp.dirty[:0]
}

// closePacket sends what pc has queued once (best effort: what the kernel
// does not take at once is dropped) and has the backend release it.
func (l *Loop) closePacket(pc *PacketConn) {
	if pc.closing {
		return
	}
	if !pc.waitOut {
		l.sendPackets(pc)
	}
	pc.closing = true
	pc.kdrops.release() // the backend closes fd
	l.be.closePacket(pc.idx)
}

// closePackets closes every datagram socket of a stopping loop.
func (l *Loop) closePackets() {
	for _, pc := range l.udp.socks {
		if pc != nil {
			l.closePacket(pc)
		}
	}
}

// String describes pc for logs: its local address, and its peer if
// connected.
func (pc *PacketConn) String() string {
	if pc.peer.IsValid() {
		return fmt.Sprintf("udp %s->%s", pc.local, pc.peer)
	}
	return "udp " + pc.local.String()
}
