package net

// The backend's part in datagram sockets is readiness only. A datagram
// socket has no stream state for a backend to keep: the loop reads and
// writes it itself with recvmmsg and sendmmsg (udp_mmsg.go), many
// datagrams per system call, on either backend. The backend tells it when
// to: input may be waiting, or a full send buffer has room again.
// Datagram sockets are numbered apart from connection slots (idx).

// packetBackend is the loop → backend half for datagram sockets.
type packetBackend interface {
	// openPacket registers datagram socket idx (fd). packetReady(idx,
	// false) follows whenever input may be waiting, including once at the
	// start; after a report the loop reads until EAGAIN, or it comes back
	// by itself (no new report is due for input it left).
	openPacket(idx uint32, fd int) error
	// watchPacketOut asks for one packetReady(idx, true) once fd can take
	// output again, after a send hit EAGAIN.
	watchPacketOut(idx uint32)
	// closePacket stops every operation on idx; packetClosed reports when
	// the kernel holds nothing of it any more and fd is closed.
	closePacket(idx uint32)
}

// packetSink is the backend → loop half.
type packetSink interface {
	// packetReady: datagram socket idx may have input (out false) or can
	// take output (out true).
	packetReady(idx uint32, out bool)
	// packetClosed: the kernel holds nothing of idx; its fd is closed.
	packetClosed(idx uint32)
}
