package net

import "syscall"

// A datagram socket has no stream state for a backend to keep. The
// io_uring backend receives: a multishot recvmsg per socket fills
// buffers of a ring of their own, and each datagram is reported with
// packetInput. The epoll backend only tells the loop when to read
// (packetReady), and the loop reads with recvmmsg, many datagrams per
// system call (udp_mmsg.go). Either way the loop sends with sendmmsg and
// the backend reports when a full send buffer has room again. Datagram
// sockets are numbered apart from connection slots (idx).

// packetBackend is the loop → backend half for datagram sockets.
type packetBackend interface {
	// openPacket registers datagram socket idx (fd). A backend that
	// receives itself (io_uring's multishot recvmsg) reports each datagram
	// with packetInput, into buffers of rx's size; otherwise
	// packetReady(idx, false) follows whenever input may be waiting,
	// including once at the start, and the loop reads until EAGAIN or comes
	// back by itself (no new report is due for input it left).
	openPacket(idx uint32, fd int, rx packetRecv) error
	// watchPacketOut asks for one packetReady(idx, true) once fd can take
	// output again, after a send hit EAGAIN.
	watchPacketOut(idx uint32)
	// packetRead tells the backend of a datagram the loop read itself
	// (recvmmsg) from the sender whose address the kernel wrote in name,
	// for its batched waits (Config.BatchWait) as the datagrams it
	// receives itself; name is valid only during the call.
	packetRead(name []byte)
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
	// packetInput: one datagram for idx (a GRO run when ctl says so):
	// payload, the sender's address as the kernel wrote it, the control
	// messages and msg_flags. All of it is valid only during the call.
	packetInput(idx uint32, payload, name, ctl []byte, flags uint32)
	// packetError: a receive on idx failed with e (ECONNREFUSED on a
	// connected socket); the socket goes on.
	packetError(idx uint32, e syscall.Errno)
}

// packetRecv is what a backend that receives needs to know of a socket.
type packetRecv struct {
	bufSize int  // payload room per datagram
	gro     bool // room for a UDP_GRO control message
	batch   int  // datagrams per receive batch (WithPacketBatch)
}
