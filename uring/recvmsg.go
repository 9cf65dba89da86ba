//go:build linux

package uring

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// PrepRecvmsgMultishot prepares a multishot recvmsg (Linux 6.0) that takes
// a buffer from provided-buffer group bgid for every message and stays
// armed until a completion arrives without F_MORE (then re-arm it). msg is
// a template: only its Namelen and Controllen are read, as the room kept
// for the peer's address and the control messages in every buffer; Iov
// must be empty. Each completion's buffer holds a RecvmsgOut, the name,
// the control messages and the payload: see ParseRecvmsg. msg must stay
// alive until the last completion.
func (s *SQE) PrepRecvmsgMultishot(fd int, msg *unix.Msghdr, flags int, bgid uint16) {
	s.PrepRecvmsg(fd, msg, flags)
	s.Ioprio |= RecvMultishot
	s.Flags |= SQEBufferSelect
	s.BufIndex = bgid
}

// RecvmsgOut is struct io_uring_recvmsg_out, at the start of every buffer a
// multishot recvmsg fills. Namelen and Controllen are the kernel's
// lengths, which may exceed the template's room (then the data was cut,
// and Flags carries MSG_CTRUNC for control data). A datagram longer than
// the buffer's payload room is cut too: Flags carries MSG_TRUNC, and
// Payloadlen is what the buffer holds (seen on Linux 6.18).
type RecvmsgOut struct {
	Namelen    uint32 // length of the peer's address
	Controllen uint32 // length of the control messages
	Payloadlen uint32 // length of the payload in the buffer
	Flags      uint32 // msg_flags (MSG_TRUNC, MSG_CTRUNC, ...)
}

// SizeofRecvmsgOut is the size of RecvmsgOut in the buffer.
const SizeofRecvmsgOut = 16

// ParseRecvmsg splits buf, the first n bytes (the completion's result) of
// a buffer a multishot recvmsg with template msg filled, into its header,
// the peer's address, the control messages and the payload received. ok
// is false when n cannot hold the header and the template's room.
func ParseRecvmsg(buf []byte, n int, msg *unix.Msghdr) (out RecvmsgOut, name, control, payload []byte, ok bool) {
	nameRoom, ctlRoom := int(msg.Namelen), int(msg.Controllen)
	if n > len(buf) || n < SizeofRecvmsgOut+nameRoom+ctlRoom {
		return out, nil, nil, nil, false
	}
	out = RecvmsgOut{
		Namelen:    binary.NativeEndian.Uint32(buf[0:]),
		Controllen: binary.NativeEndian.Uint32(buf[4:]),
		Payloadlen: binary.NativeEndian.Uint32(buf[8:]),
		Flags:      binary.NativeEndian.Uint32(buf[12:]),
	}
	p := SizeofRecvmsgOut
	name = buf[p : p+min(int(out.Namelen), nameRoom)]
	p += nameRoom
	control = buf[p : p+min(int(out.Controllen), ctlRoom)]
	p += ctlRoom
	payload = buf[p:n]
	return out, name, control, payload, true
}
