//go:build linux

package net

import (
	"fmt"
	"math/bits"

	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/bufpool"
	"github.com/veloq/veloq/uring"
)

// The io_uring backend's datagram sockets. Input is a multishot recvmsg
// per socket selecting buffers from a buffer ring of its own (pktRing):
// the kernel receives every datagram into a buffer as it arrives, posts
// a completion for each, and the backend reports it with packetInput and
// recycles the buffer once the loop returns. No receive system call is
// made; a burst costs one enter for all of it. Output is the loop's
// sendmmsg, with a one-shot POLLOUT when the send buffer is full.
//
// Where the buffer ring cannot be made (memlock limits), sockets fall back
// to readiness: a multishot POLLIN and the loop's recvmmsg, as on epoll.

// pktBufGroup is the buffer group of datagram buffers (the stream
// receive buffers are group 0).
const pktBufGroup = 1

// upkt is the io_uring backend's record of one datagram socket.
type upkt struct {
	fd      int
	gen     uint32
	ops     int32
	recv    bool         // multishot recvmsg armed
	msg     *unix.Msghdr // its template, read by the kernel while armed
	pollIn  bool         // multishot POLLIN armed (the readiness fallback)
	pollOut bool
	closing bool
}

// pktRing is the loop's ring of datagram buffers, each with room for the
// recvmsg header, a peer address, a UDP_GRO control message and a
// payload of the sockets' buffer size. The arena is mmap'd: the kernel
// writes into it, and pages of a buffer are touched only as far as
// datagrams reach (a 64 B datagram touches one page of a 64 KiB buffer).
type pktRing struct {
	br     *uring.BufRing
	arena  *bufpool.Arena
	room   int // payload room per buffer
	failed bool
}

// pktHeadroom is what a buffer holds before the payload.
var pktHeadroom = uring.SizeofRecvmsgOut + sockaddrLen + groCmsgSpace

func (r *pktRing) setup(ring *uring.Ring, room, batch int) error {
	n := 1 << bits.Len(uint(max(4*batch, 16)-1)) // a power of two, 4 batches at least
	n = min(n, 1024)
	arena, err := bufpool.NewArena(pktHeadroom+room, n)
	if err != nil {
		return err
	}
	br, err := ring.SetupBufRing(uint32(n), pktBufGroup)
	if err != nil {
		arena.Close()
		return err
	}
	for i := 0; i < n; i++ {
		br.Add(arena.Buf(i), uint16(i), i)
	}
	br.Advance(n)
	r.br, r.arena, r.room = br, arena, room
	return nil
}

func (r *pktRing) free(ring *uring.Ring) error {
	var err error
	if r.br != nil {
		err = ring.FreeBufRing(r.br)
		r.br = nil
	}
	if r.arena != nil {
		if cerr := r.arena.Close(); err == nil {
			err = cerr
		}
		r.arena = nil
	}
	return err
}

func (b *uringBackend) openPacket(idx uint32, fd int, rx packetRecv) error {
	for int(idx) >= len(b.pkts) {
		b.pkts = append(b.pkts, upkt{fd: -1})
	}
	p := &b.pkts[idx]
	*p = upkt{fd: fd, gen: (p.gen + 1) & 0xffffff}
	if b.prx.br == nil && !b.prx.failed {
		if err := b.prx.setup(b.ring, rx.bufSize, rx.batch); err != nil {
			b.prx.failed = true
			b.log.Warn("veloq: no io_uring buffer ring for datagrams; receiving by readiness and recvmmsg", "err", err)
		}
	}
	if b.prx.br != nil && rx.bufSize <= b.prx.room {
		p.msg = &unix.Msghdr{Namelen: sockaddrLen}
		if rx.gro {
			p.msg.SetControllen(groCmsgSpace)
		}
		b.armPacketRecv(idx, p)
		return nil
	}
	b.armPacketIn(idx, p)
	// Datagrams may have arrived between bind and the poll: a multishot
	// poll reports only later arrivals, so the first look is the loop's.
	b.ev.packetReady(idx, false)
	return nil
}

func (b *uringBackend) armPacketRecv(idx uint32, p *upkt) {
	sq := b.sqe()
	sq.PrepRecvmsgMultishot(p.fd, p.msg, 0, pktBufGroup)
	sq.SetUserData(token(opPktIn, idx, p.gen))
	p.recv = true
	p.ops++
}

func (b *uringBackend) armPacketIn(idx uint32, p *upkt) {
	sq := b.sqe()
	sq.PrepPollMultishot(p.fd, uint32(unix.POLLIN))
	sq.SetUserData(token(opPktIn, idx, p.gen))
	p.pollIn = true
	p.ops++
}

// packetRead counts a datagram of the readiness fallback, which the loop
// reads itself, as those of the multishot receive are (packetReceived).
func (b *uringBackend) packetRead(name []byte) { b.act.packetInput(name) }

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
// operations, and reports whether the record is closing.
func (b *uringBackend) settlePacket(idx uint32, p *upkt) bool {
	if !p.closing {
		return false
	}
	if p.ops == 0 && p.fd >= 0 {
		unix.Close(p.fd)
		p.fd, p.msg = -1, nil
		b.ev.packetClosed(idx)
	}
	return true
}

func (b *uringBackend) packetCompleted(op uint64, idx, gen uint32, cqe *uring.CQE) {
	if int(idx) >= len(b.pkts) {
		b.recyclePacket(cqe)
		return
	}
	p := &b.pkts[idx]
	if p.gen&0xffffff != gen || p.fd < 0 {
		b.recyclePacket(cqe)
		return
	}
	switch {
	case op == opPktOut:
		p.pollOut = false
		p.ops--
		if !b.settlePacket(idx, p) {
			b.ev.packetReady(idx, true)
		}
	case p.recv:
		b.packetReceived(idx, p, cqe)
	default:
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
}

// packetReceived handles a completion of a socket's multishot recvmsg.
func (b *uringBackend) packetReceived(idx uint32, p *upkt, cqe *uring.CQE) {
	gen := p.gen
	if !cqe.More() {
		p.recv = false
		p.ops--
	}
	if b.settlePacket(idx, p) {
		b.recyclePacket(cqe)
		return
	}
	switch bid, ok := cqe.BufferID(); {
	case cqe.Res >= 0 && ok:
		buf := b.prx.arena.Buf(int(bid))
		out, name, ctl, payload, valid := uring.ParseRecvmsg(buf, int(cqe.Res), p.msg)
		if valid {
			b.act.packetInput(name)
			b.ev.packetInput(idx, payload, name, ctl, out.Flags)
		}
		b.prx.br.Recycle(buf, bid)
	case cqe.Res < 0:
		// ENOBUFS: the ring ran dry in a burst; the buffers are back by
		// now (each is recycled as soon as its datagram is handled), so
		// re-arming goes on. Other errors (ECONNREFUSED on a connected
		// socket) end the multishot receive and are reported.
		if e := unix.Errno(-cqe.Res); e != unix.ENOBUFS && e != unix.ECANCELED {
			b.ev.packetError(idx, e)
		}
	}
	// The report may have closed the socket, or it may have been reopened.
	if p = &b.pkts[idx]; p.fd < 0 || p.gen != gen || p.closing || p.recv {
		return
	}
	if cqe.Res < 0 && cqe.Res != -int32(unix.ENOBUFS) && cqe.Res != -int32(unix.ECONNREFUSED) {
		// An error the receive may meet again at once: readiness and the
		// loop's recvmmsg, which counts errors without spinning, take over.
		b.log.Debug("veloq: datagram recvmsg failed; receiving by readiness", "err", fmt.Errorf("recvmsg: %w", unix.Errno(-cqe.Res)))
		p.msg = nil
		b.armPacketIn(idx, p)
		b.ev.packetReady(idx, false)
		return
	}
	b.armPacketRecv(idx, p)
}

// recyclePacket returns the buffer of a completion that is not handled
// (its socket is gone or closing).
func (b *uringBackend) recyclePacket(cqe *uring.CQE) {
	if bid, ok := cqe.BufferID(); ok && b.prx.br != nil && cqe.UserData>>56 == opPktIn {
		b.prx.br.Recycle(b.prx.arena.Buf(int(bid)), bid)
	}
}
