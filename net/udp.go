package net

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/veloq/veloq/internal/sock"
)

// Datagram sockets on the loops (UDP). A PacketConn is one socket owned by
// one loop: its handler runs on the loop for every datagram, with a view
// of the payload and the sender's address that are valid during the call,
// and its writes are queued and leave in one batch (sendmmsg, grouped by
// GSO where the kernel offers it) when the loop's iteration ends.
//
// UDP has no backpressure: nothing tells a sender that the receiver is
// slow, and the kernel drops what does not fit in a socket buffer. A
// PacketConn therefore never waits for room either: output beyond the
// queue bound (WithMaxPacketQueue) is dropped and counted
// (PacketStats.Dropped), and WriteTo says so with ErrPacketQueueFull.
// Input the loop does not read fast enough is dropped by the kernel when
// the socket's receive buffer is full; PacketStats.KernelDrops reports
// the kernel's count of those (see the package doc on sizing the buffer).

// Errors of datagram sockets.
var (
	// ErrPacketQueueFull: the datagram was dropped because the socket's
	// output queue is at its bound (WithMaxPacketQueue). UDP has no
	// backpressure; the drop is counted in PacketStats.Dropped.
	ErrPacketQueueFull = errors.New("veloq: datagram dropped: output queue full")
	// ErrPacketTooLarge: the datagram is longer than UDP allows (65,507
	// bytes over IPv4, 65,527 over IPv6).
	ErrPacketTooLarge = errors.New("veloq: datagram too large for UDP")
	// ErrPacketAddr: the destination is missing (on a socket that is not
	// connected, or Reply outside OnPacket) or of a family the socket
	// cannot reach (an IP address on a unixgram socket: use Reply).
	ErrPacketAddr = errors.New("veloq: bad datagram destination")
)

// maxDatagram is the largest UDP payload: 65,535 less the UDP header (8)
// and the IPv4 header (20). IPv6's header is not counted in its payload
// length, so it allows 20 more.
const (
	maxDatagram4 = 65535 - 8 - 20
	maxDatagram6 = 65535 - 8
)

// PacketHandler serves a datagram socket. OnPacket runs on the socket's
// loop for every datagram received: p is the payload (possibly empty) and
// from the sender (the zero AddrPort on a unixgram socket, whose peers
// have paths: answer them with Reply). Both are valid only during the
// call, so copy what must outlive it; p points into the loop's receive
// buffer.
type PacketHandler interface {
	OnPacket(pc *PacketConn, p []byte, from netip.AddrPort)
}

// PacketHandlerFunc adapts a function to PacketHandler.
type PacketHandlerFunc func(pc *PacketConn, p []byte, from netip.AddrPort)

// OnPacket calls f.
func (f PacketHandlerFunc) OnPacket(pc *PacketConn, p []byte, from netip.AddrPort) { f(pc, p, from) }

// PacketConn is a datagram socket served by one loop. Its methods other
// than AsyncWriteTo, Close, Stats and the address getters must be called
// on its loop (from its handler, or a function posted to the loop).
type PacketConn struct {
	loop    *Loop
	h       PacketHandler
	fd      int
	idx     uint32
	family  int
	local   netip.AddrPort
	peer    netip.AddrPort // a connected IP socket's peer (DialPacket)
	conn    bool           // connected (DialPacket): Write sends to the peer
	cur     []byte         // the sender's raw address while OnPacket runs (Reply)
	cfg     *packetOptions
	closing bool // the loop has asked the backend to close it
	done    chan struct{}

	// Offloads the kernel offers this socket (udp_mmsg.go's
	// kernelOffloads); gso turns off for good if a GSO send fails with
	// EIO (a device without checksum offload).
	gso, gro bool
	gso0     bool   // gso as probed at the start (gso is the loop's copy)
	gsoLimit uint32 // runs of datagrams this long or longer are not grouped (EINVAL seen); 0: none

	// Output: payloads back to back in out, one pktMsg per datagram,
	// head the first not yet sent; queued is the bytes counted against
	// the bound.
	out     []byte
	msgs    []pktMsg
	head    int
	queued  int
	dirty   bool // in the loop's list of sockets to flush
	waitOut bool // a send hit EAGAIN; the backend reports room
	again   bool // input was left unread; the loop reads again
	tx      *txBatch

	stats  packetCounters
	kdrops kernelDrops
}

// kernelDrops reads the kernel's drop counter of a socket for Stats, from
// any goroutine: mu keeps a read from racing the loop's release of the
// descriptor (a closed number may name another socket by then), and
// extends the kernel's 32-bit counter to 64 bits.
type kernelDrops struct {
	mu    sync.Mutex
	fd    int    // -1 once released: total is final
	raw   uint32 // the kernel's counter at the last read
	total uint64
}

// read returns the drops so far, reading the kernel's counter while the
// descriptor is held. A wrap between two reads (2³² drops) is counted
// once, so the total is exact when Stats is called at least that often.
func (k *kernelDrops) read() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.update()
	return k.total
}

// update adds what the kernel counted since the last read; k.mu held.
func (k *kernelDrops) update() {
	if k.fd < 0 {
		return
	}
	if v, err := sock.Drops(k.fd); err == nil {
		k.total += uint64(v - k.raw)
		k.raw = v
	}
}

// release takes the last reading before the loop lets the descriptor go;
// on the loop.
func (k *kernelDrops) release() {
	k.mu.Lock()
	k.update()
	k.fd = -1
	k.mu.Unlock()
}

// pktMsg is one queued datagram: its bytes out[off:off+n] and its
// destination (tolen 0: the connected peer).
type pktMsg struct {
	off, n uint32
	tolen  uint32
	to     [sockaddrLen]byte
}

// pktOverhead is what a queued datagram counts against the queue bound
// beyond its payload, so that empty datagrams are bounded too: about its
// pktMsg.
const pktOverhead = 128

// packetCounters are added once per delivery (rxCount) and per send,
// after the handler calls and the system call: a reader waits for Received
// or Sent to reach a count, not for what the handler saw. Received and
// Sent are added after the counters that go with them.
type packetCounters struct {
	received, bytesIn, sent, bytesOut    atomic.Uint64
	dropped, truncated, errors, refused  atomic.Uint64
	gsoSends, groReceives, panics, async atomic.Uint64
	gsoOff                               atomic.Bool // GSO turned off after EIO (for Stats)
}

// PacketStats is a snapshot of a datagram socket's counters.
type PacketStats struct {
	Received uint64 // datagrams handed to OnPacket
	BytesIn  uint64
	Sent     uint64 // datagrams the kernel took
	BytesOut uint64
	// Dropped counts datagrams WriteTo refused because the output queue
	// was at its bound (ErrPacketQueueFull): output veloq dropped.
	Dropped uint64
	// KernelDrops counts datagrams the kernel dropped on arrival, before
	// the loop could read them: nearly always because the socket's receive
	// buffer was full (a burst or a handler slower than the senders; see
	// WithPacketSocketBuffers), else a bad checksum. It is the kernel's
	// own counter of the socket (sk_drops, the "drops" column of
	// /proc/net/udp), read when Stats is called; 0 on kernels before
	// Linux 4.12, which do not report it (no SO_MEMINFO). Received +
	// Truncated + KernelDrops + what is still queued is what reached
	// the socket.
	KernelDrops uint64
	// Truncated counts received datagrams longer than the receive buffer
	// (WithPacketBuffer): the kernel cuts them (MSG_TRUNC) and they are
	// dropped, not handed to OnPacket.
	Truncated uint64
	// Errors counts failed sends and receive errors; the socket stays
	// open. A failed send drops its datagram.
	Errors uint64
	// Refused counts ICMP port-unreachable reports (ECONNREFUSED), which
	// the kernel gives only to connected sockets; they are also in Errors.
	Refused uint64
	// GSOSends counts sends of several datagrams as one (UDP_SEGMENT),
	// GROReceives receives that the kernel coalesced (UDP_GRO).
	GSOSends    uint64
	GROReceives uint64
	// Panics counts OnPacket calls that panicked (the datagram is lost;
	// the socket goes on).
	Panics uint64
	// GSO and GRO say whether the socket uses the kernel's offloads.
	GSO, GRO bool
}

// Stats returns a snapshot of pc's counters. Safe from any goroutine.
func (pc *PacketConn) Stats() PacketStats {
	s := &pc.stats
	return PacketStats{
		Received: s.received.Load(), BytesIn: s.bytesIn.Load(),
		Sent: s.sent.Load(), BytesOut: s.bytesOut.Load(),
		Dropped: s.dropped.Load(), KernelDrops: pc.kdrops.read(),
		Truncated: s.truncated.Load(),
		Errors:    s.errors.Load(), Refused: s.refused.Load(),
		GSOSends: s.gsoSends.Load(), GROReceives: s.groReceives.Load(),
		Panics: s.panics.Load(),
		GSO:    pc.cfg.gso && pc.gso0 && !s.gsoOff.Load(), GRO: pc.gro,
	}
}

// Add returns the sum of s and o (the offload flags are or-ed), for
// totals over the sockets of a PacketListener.
func (s PacketStats) Add(o PacketStats) PacketStats {
	s.Received += o.Received
	s.BytesIn += o.BytesIn
	s.Sent += o.Sent
	s.BytesOut += o.BytesOut
	s.Dropped += o.Dropped
	s.KernelDrops += o.KernelDrops
	s.Truncated += o.Truncated
	s.Errors += o.Errors
	s.Refused += o.Refused
	s.GSOSends += o.GSOSends
	s.GROReceives += o.GROReceives
	s.Panics += o.Panics
	s.GSO = s.GSO || o.GSO
	s.GRO = s.GRO || o.GRO
	return s
}

// Loop returns the loop that serves pc.
func (pc *PacketConn) Loop() *Loop { return pc.loop }

// LocalAddr returns the address pc is bound to.
func (pc *PacketConn) LocalAddr() netip.AddrPort { return pc.local }

// RemoteAddr returns the peer of a connected socket (DialPacket), or the
// zero AddrPort.
func (pc *PacketConn) RemoteAddr() netip.AddrPort { return pc.peer }

// Done is closed once pc is closed and its descriptor released.
func (pc *PacketConn) Done() <-chan struct{} { return pc.done }

// WriteTo queues p as one datagram to to; it leaves with the other
// datagrams queued in this loop iteration, in one batch. On a connected
// socket the zero AddrPort means its peer. p is copied: the caller may
// reuse it at once. Call it on pc's loop; from other goroutines use
// AsyncWriteTo.
//
// It returns ErrPacketQueueFull (and counts the drop) when the output
// queue is at its bound, ErrPacketTooLarge, ErrPacketAddr, ErrClosed, or
// ErrNotOnLoop. Errors the kernel reports later (ECONNREFUSED, EMSGSIZE
// above a path's MTU) are counted in Stats.
func (pc *PacketConn) WriteTo(p []byte, to netip.AddrPort) error {
	if !pc.loop.onLoop() {
		return ErrNotOnLoop
	}
	return pc.queue(p, to)
}

// Write queues p to the peer of a connected socket; see WriteTo.
func (pc *PacketConn) Write(p []byte) error { return pc.WriteTo(p, netip.AddrPort{}) }

// Reply queues p to the sender of the datagram being handled: call it
// inside OnPacket (elsewhere it returns ErrPacketAddr). It works on every
// network and is the way to answer a unixgram peer, whose address is a
// path; see WriteTo for the rest.
func (pc *PacketConn) Reply(p []byte) error {
	if !pc.loop.onLoop() {
		return ErrNotOnLoop
	}
	if pc.cur == nil {
		return fmt.Errorf("%w: Reply outside OnPacket", ErrPacketAddr)
	}
	if len(pc.cur) > sockaddrLen || len(pc.cur) <= 2 {
		// A peer that never bound a name (unixgram) cannot be answered.
		return fmt.Errorf("%w: the sender has no address to answer", ErrPacketAddr)
	}
	return pc.queueRaw(p, pc.cur, netip.AddrPort{})
}

// AsyncWriteTo queues a copy of p to to from any goroutine: the copy is
// posted to pc's loop, which queues it as WriteTo does and sends it with
// that iteration's batch. It returns ErrClosed once the loop has stopped
// and ErrPacketTooLarge or ErrPacketAddr for what WriteTo would refuse;
// a drop for a full queue happens on the loop and is only counted
// (Stats.Dropped). Each call allocates the copy and a closure; a
// goroutine with many datagrams can post one function that calls WriteTo
// for each instead.
func (pc *PacketConn) AsyncWriteTo(p []byte, to netip.AddrPort) error {
	if err := pc.check(len(p), to); err != nil {
		return err
	}
	b := append([]byte(nil), p...)
	pc.stats.async.Add(1)
	return pc.loop.Post(func() { _ = pc.queue(b, to) })
}

// Close closes pc from any goroutine: what is queued gets one last send,
// then the socket is released (Done is closed then). Datagrams that
// arrive meanwhile are dropped. It returns ErrClosed when pc's loop has
// stopped (and closed pc with it).
func (pc *PacketConn) Close() error {
	if pc.loop.InLoop() {
		pc.loop.closePacket(pc)
		return nil
	}
	return pc.loop.Post(func() { pc.loop.closePacket(pc) })
}

// check validates a datagram before it is queued.
func (pc *PacketConn) check(n int, to netip.AddrPort) error {
	switch {
	case !to.IsValid() && !pc.conn:
		return fmt.Errorf("%w: no address on a socket that is not connected", ErrPacketAddr)
	case to.IsValid() && pc.family == syscall.AF_UNIX:
		return fmt.Errorf("%w: %s on a unixgram socket", ErrPacketAddr, to)
	case to.IsValid() && pc.family == syscall.AF_INET && !to.Addr().Unmap().Is4():
		return fmt.Errorf("%w: %s from an IPv4 socket", ErrPacketAddr, to)
	case pc.family == syscall.AF_UNIX:
		// The kernel bounds a unixgram datagram by the send buffer
		// (EMSGSIZE, counted in Stats.Errors).
	case n > maxDatagram6 || n > maxDatagram4 && (pc.family == syscall.AF_INET || to.Addr().Unmap().Is4()):
		return fmt.Errorf("%w: %d bytes", ErrPacketTooLarge, n)
	}
	return nil
}

// queue appends one datagram to the output queue; on the loop.
func (pc *PacketConn) queue(p []byte, to netip.AddrPort) error {
	return pc.queueRaw(p, nil, to)
}

// queueRaw appends one datagram to raw (a sockaddr as the kernel wrote
// it), or else to to; on the loop.
func (pc *PacketConn) queueRaw(p, raw []byte, to netip.AddrPort) error {
	if pc.closing {
		return ErrClosed
	}
	if raw == nil {
		if err := pc.check(len(p), to); err != nil {
			return err
		}
	} else if pc.family != syscall.AF_UNIX {
		if err := pc.check(len(p), getSockaddr(raw, uint32(len(raw)))); err != nil {
			return err
		}
	}
	cost := len(p) + pktOverhead
	if pc.queued+cost > pc.cfg.maxQueue {
		pc.stats.dropped.Add(1)
		return ErrPacketQueueFull
	}
	m := pktMsg{off: uint32(len(pc.out)), n: uint32(len(p))}
	switch {
	case raw != nil:
		m.tolen = uint32(copy(m.to[:], raw))
	case to.IsValid():
		m.tolen = putSockaddr(&m.to, pc.family, to)
	}
	pc.out = append(pc.out, p...)
	pc.msgs = append(pc.msgs, m)
	pc.queued += cost
	if !pc.dirty {
		pc.dirty = true
		pc.loop.udp.dirty = append(pc.loop.udp.dirty, pc)
	}
	return nil
}
