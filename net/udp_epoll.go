//go:build linux

package net

import (
	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/epoll"
)

// epkt is the epoll backend's record of one datagram socket, registered
// edge-triggered for In and Out: an In edge reports input readiness, an
// Out edge reports room once the loop asked for it (watchOut).
type epkt struct {
	fd       int
	gen      uint32
	watchOut bool
}

func (b *epollBackend) openPacket(idx uint32, fd int, _ packetRecv) error {
	for int(idx) >= len(b.pkts) {
		b.pkts = append(b.pkts, epkt{fd: -1})
	}
	p := &b.pkts[idx]
	*p = epkt{fd: fd, gen: (p.gen + 1) & 0xffffff}
	// Registering reports the current state as a first edge, so input
	// that arrived before is not missed.
	if err := b.p.Add(fd, epoll.In|epoll.Out|epoll.EdgeTriggered, token(opPktIn, idx, p.gen)); err != nil {
		p.fd = -1
		return err
	}
	return nil
}

func (b *epollBackend) packetRead(name []byte) { b.act.packetInput(name) }

func (b *epollBackend) watchPacketOut(idx uint32) { b.pkts[idx].watchOut = true }

func (b *epollBackend) closePacket(idx uint32) {
	p := &b.pkts[idx]
	if p.fd < 0 {
		return
	}
	_ = b.p.Del(p.fd)
	unix.Close(p.fd)
	p.fd = -1
	b.ev.packetClosed(idx)
}

func (b *epollBackend) packetEvent(idx, gen uint32, ev uint32) {
	if int(idx) >= len(b.pkts) {
		return
	}
	p := &b.pkts[idx]
	if p.gen != gen || p.fd < 0 {
		return
	}
	// Err raises an edge of its own: a queued ICMP error (ECONNREFUSED on
	// a connected socket) is read as an error by the loop's next receive.
	if ev&(epoll.In|epoll.Err|epoll.Hup) != 0 {
		b.ev.packetReady(idx, false)
	}
	if p = &b.pkts[idx]; p.fd < 0 || p.gen != gen {
		return
	}
	if ev&(epoll.Out|epoll.Err) != 0 && p.watchOut {
		p.watchOut = false
		b.ev.packetReady(idx, true)
	}
}
