package net

import (
	"os"
	"syscall"
)

// Sending a socket's queued datagrams: sendmmsg over batches of up to
// maxSendBatch messages, where a run of datagrams of one size to one peer
// becomes one message with a UDP_SEGMENT control message (GSO) when the
// kernel offers it: the kernel cuts it into datagrams after routing it
// once, which is where GSO saves its CPU.

const (
	maxSendBatch = 64
	// maxGSOSegments is the kernel's UDP_MAX_SEGMENTS before Linux 6.10
	// raised it to 128; maxGSOBytes keeps the whole run under the 64 KiB
	// a UDP datagram's length field can describe.
	maxGSOSegments = 64
	maxGSOBytes    = 65000
)

// txBatch is a socket's send batch: headers, one iovec each, and room for
// a UDP_SEGMENT message each. count[i] is how many queued datagrams
// header i carries.
type txBatch struct {
	hdrs  [maxSendBatch]mmsghdr
	iovs  [maxSendBatch]iovec
	ctl   []byte
	count [maxSendBatch]int
}

// build fills the batch from pc's queue from its head and returns the
// number of headers. noGroupAt is a queue index whose run goes out
// datagram by datagram (its GSO send failed).
func (t *txBatch) build(pc *PacketConn, noGroupAt int) int {
	k := 0
	for i := pc.head; i < len(pc.msgs) && k < maxSendBatch; k++ {
		m := &pc.msgs[i]
		run := 1
		if pc.gso && pc.cfg.gso && i != noGroupAt && m.n > 0 && (pc.gsoLimit == 0 || m.n < pc.gsoLimit) {
			size, total := m.n, m.n
			for j := i + 1; j < len(pc.msgs) && run < maxGSOSegments; j++ {
				o := &pc.msgs[j]
				if o.n == 0 || o.n > size || total+o.n > maxGSOBytes || o.tolen != m.tolen || string(o.to[:o.tolen]) != string(m.to[:m.tolen]) {
					break
				}
				run++
				total += o.n
				if o.n < size {
					break // a shorter datagram ends a run
				}
			}
		}
		h := &t.hdrs[k]
		h.Len = 0
		h.Hdr = msghdr{}
		if m.tolen > 0 {
			h.Hdr.Name = &m.to[0]
			h.Hdr.Namelen = m.tolen
		}
		end := pc.msgs[i+run-1]
		t.iovs[k].Base = nil
		if n := end.off + end.n - m.off; n > 0 {
			t.iovs[k].Base = &pc.out[m.off]
			t.iovs[k].SetLen(int(n))
		} else {
			t.iovs[k].SetLen(0)
		}
		h.Hdr.Iov = &t.iovs[k]
		h.Hdr.Iovlen = 1
		if run > 1 {
			if t.ctl == nil {
				t.ctl = make([]byte, maxSendBatch*gsoCmsgSpace)
			}
			c := t.ctl[k*gsoCmsgSpace : (k+1)*gsoCmsgSpace]
			putSegmentCmsg(c, uint16(m.n))
			h.Hdr.Control = &c[0]
			h.Hdr.SetControllen(gsoCmsgSpace)
		}
		t.count[k] = run
		i += run
	}
	return k
}

// sendPackets sends pc's queue until it is empty or the socket buffer is
// full (then the backend reports room). A datagram the kernel refuses is
// dropped and counted; the socket goes on.
func (l *Loop) sendPackets(pc *PacketConn) {
	if pc.head == len(pc.msgs) {
		return
	}
	if pc.tx == nil {
		pc.tx = new(txBatch)
	}
	t := pc.tx
	noGroupAt := -1
	var sent, bytes, gsoSends uint64
	for pc.head < len(pc.msgs) {
		k := t.build(pc, noGroupAt)
		n, e := mmsg(false, pc.fd, t.hdrs[:k])
		switch {
		case e == syscall.EAGAIN || e == syscall.ENOBUFS:
			pc.waitOut = true
			l.be.watchPacketOut(pc.idx)
			k = 0
		case e == syscall.EINTR:
			continue
		case e != 0:
			if t.count[0] > 1 {
				// A GSO send the device or route cannot take (EIO: no
				// checksum offload; EINVAL: segment above the MTU) is sent
				// again one datagram at a time.
				switch e {
				case syscall.EIO:
					pc.gso = false
					pc.stats.gsoOff.Store(true)
					l.log.Info("veloq: UDP GSO refused by the kernel; sending datagrams one by one", "local", pc.local.String(), "err", os.NewSyscallError("sendmmsg", e))
				case syscall.EINVAL:
					// Segments above the route's MTU: runs of this size
					// and larger go out one datagram at a time from now on.
					pc.gsoLimit = pc.msgs[pc.head].n
				}
				noGroupAt = pc.head
				continue
			}
			pc.stats.errors.Add(1)
			if e == syscall.ECONNREFUSED {
				pc.stats.refused.Add(1)
			}
			pc.head++ // drop the one the kernel refused
			continue
		}
		for i := 0; i < n; i++ {
			c := t.count[i]
			first, last := pc.msgs[pc.head], pc.msgs[pc.head+c-1]
			bytes += uint64(last.off + last.n - first.off)
			sent += uint64(c)
			if c > 1 {
				gsoSends++
			}
			pc.head += c
		}
		if k == 0 || n <= 0 {
			break
		}
	}
	// Sent last, as Received (leavePacketHandler).
	pc.stats.bytesOut.Add(bytes)
	pc.stats.gsoSends.Add(gsoSends)
	pc.stats.sent.Add(sent)
	l.ctr.bytesOut += bytes
	if pc.head == len(pc.msgs) {
		pc.out, pc.msgs, pc.head, pc.queued = pc.out[:0], pc.msgs[:0], 0, 0
		// A burst's buffers are not kept for ever: past 4× a queue bound's
		// worth they go back to the heap.
		if cap(pc.out) > 4*pc.cfg.maxQueue {
			pc.out = nil
		}
		return
	}
	// Partly sent: what is left moves to the front, so a socket that
	// never empties its queue does not grow it, and the bound counts
	// only what is left.
	base := pc.msgs[pc.head].off
	pc.out = pc.out[:copy(pc.out, pc.out[base:])]
	pc.msgs = pc.msgs[:copy(pc.msgs, pc.msgs[pc.head:])]
	pc.head, pc.queued = 0, 0
	for i := range pc.msgs {
		pc.msgs[i].off -= base
		pc.queued += int(pc.msgs[i].n) + pktOverhead
	}
}
