package net

import (
	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/uring"
)

// upkt is the io_uring backend's record of one datagram socket: a
// multishot POLLIN for input readiness, a one-shot POLLOUT while the loop
// waits for room, and the count of both in the kernel for the close.
type upkt struct {
	fd      int
	gen     uint32
	ops     int32
	pollIn  bool
	pollOut bool
	closing bool
}

func (b *uringBackend) openPacket(idx uint32, fd int) error {
	for int(idx) >= len(b.pkts) {
		b.pkts = append(b.pkts, upkt{fd: -1})
	}
	p := &b.pkts[idx]
	*p = upkt{fd: fd, gen: (p.gen + 1) & 0xffffff}
	b.armPacketIn(idx, p)
	// Datagrams may have arrived between bind and the poll: a multishot
	// poll reports only later arrivals, so the first look is the loop's.
	b.ev.packetReady(idx, false)
	return nil
}

func (b *uringBackend) armPacketIn(idx uint32, p *upkt) {
	sq := b.sqe()
	sq.PrepPollMultishot(p.fd, uint32(unix.POLLIN))
	sq.SetUserData(token(opPktIn, idx, p.gen))
	p.pollIn = true
	p.ops++
}

func (b *uringBackend) watchPacketOut(idx uint32) {
	p := &b.pkts[idx]
	if p.closing || p.pollOut {
		return
	}
	sq := b.sqe()
	sq.PrepPollAdd(p.fd, uint32(unix.POLLOUT))
	sq.SetUserData(token(opPktOut, idx, p.gen))
	p.pollOut = true
	p.ops++
}

func (b *uringBackend) closePacket(idx uint32) {
	p := &b.pkts[idx]
	if p.closing || p.fd < 0 {
		return
	}
	p.closing = true
	if p.ops == 0 {
		b.settlePacket(idx, p)
		return
	}
	s := b.sqe()
	s.PrepCancelFd(p.fd, uring.AsyncCancelAll)
	s.SetUserData(token(opCancel, 0, 0))
	s.SetFlags(uring.SQECQESkipSuccess)
}

// settlePacket closes a closing socket once the kernel holds none of its
// polls, and reports whether the record is closing.
func (b *uringBackend) settlePacket(idx uint32, p *upkt) bool {
	if !p.closing {
		return false
	}
	if p.ops == 0 && p.fd >= 0 {
		unix.Close(p.fd)
		p.fd = -1
		b.ev.packetClosed(idx)
	}
	return true
}

func (b *uringBackend) packetCompleted(op uint64, idx, gen uint32, cqe *uring.CQE) {
	if int(idx) >= len(b.pkts) {
		return
	}
	p := &b.pkts[idx]
	if p.gen&0xffffff != gen || p.fd < 0 {
		return
	}
	if op == opPktOut {
		p.pollOut = false
		p.ops--
		if !b.settlePacket(idx, p) {
			b.ev.packetReady(idx, true)
		}
		return
	}
	if !cqe.More() {
		p.pollIn = false
		p.ops--
	}
	if b.settlePacket(idx, p) {
		return
	}
	if !p.pollIn {
		b.armPacketIn(idx, p) // the multishot poll ended (overflow, error)
	}
	b.ev.packetReady(idx, false)
}
