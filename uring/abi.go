//go:build linux

package uring

import (
	"syscall"
	"unsafe"
)

// SQE is struct io_uring_sqe, 64 bytes, laid out exactly as the kernel
// expects. Unions are flattened to their most common member; the Prep*
// methods document which field carries what for each opcode.
type SQE struct {
	Opcode      uint8  // opcode (Op*)
	Flags       uint8  // IOSQE_* (SQE*)
	Ioprio      uint16 // ioprio; send/recv/accept flags for network ops
	Fd          int32  // fd (or registered file index with SQEFixedFile)
	Off         uint64 // off / addr2 / cmd_op
	Addr        uint64 // addr / splice_off_in / level+optname
	Len         uint32 // len
	OpFlags     uint32 // rw_flags / msg_flags / poll32_events / timeout_flags / accept_flags / cancel_flags / splice_flags / msg_ring_flags ...
	UData       uint64 // user_data: copied verbatim into the CQE; never a Go pointer
	BufIndex    uint16 // buf_index / buf_group
	Personality uint16 // personality
	FileIndex   uint32 // splice_fd_in / file_index / optlen / addr_len
	Addr3       uint64 // addr3 / optval
	_           uint64 // __pad2
}

// CQE is struct io_uring_cqe (16 bytes; this package does not enable CQE32).
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// Compile-time layout checks: these array lengths go negative (a compile
// error) if the Go structs drift from the kernel ABI sizes.
var (
	_ [64 - unsafe.Sizeof(SQE{})]byte
	_ [unsafe.Sizeof(SQE{}) - 64]byte
	_ [16 - unsafe.Sizeof(CQE{})]byte
	_ [unsafe.Sizeof(CQE{}) - 16]byte
	_ [120 - unsafe.Sizeof(params{})]byte
	_ [unsafe.Sizeof(params{}) - 120]byte
	_ [24 - unsafe.Sizeof(geteventsArg{})]byte
	_ [unsafe.Sizeof(geteventsArg{}) - 24]byte
	_ [40 - unsafe.Sizeof(bufReg{})]byte
	_ [unsafe.Sizeof(bufReg{}) - 40]byte
	_ [16 - unsafe.Sizeof(bufEntry{})]byte
)

// Err returns nil for a non-negative result, else the errno in Res.
func (c *CQE) Err() error {
	if c.Res >= 0 {
		return nil
	}
	return syscall.Errno(-c.Res)
}

// More reports IORING_CQE_F_MORE: a multishot request is still armed.
func (c *CQE) More() bool { return c.Flags&CQEFMore != 0 }

// BufMore reports IORING_CQE_F_BUF_MORE: the buffer the completion
// names (of an incrementally consumed ring) is not used up, and the
// kernel keeps what is left of it.
func (c *CQE) BufMore() bool { return c.Flags&CQEFBufMore != 0 }

// BufferID returns the provided-buffer id the kernel picked, if any.
func (c *CQE) BufferID() (uint16, bool) {
	return uint16(c.Flags >> CQEBufferShift), c.Flags&CQEFBuffer != 0
}

// struct io_sqring_offsets
type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// struct io_cqring_offsets
type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// struct io_uring_params
type params struct {
	sqEntries    uint32
	cqEntries    uint32
	flags        uint32
	sqThreadCPU  uint32
	sqThreadIdle uint32
	features     uint32
	wqFd         uint32
	resv         [3]uint32
	sqOff        sqringOffsets
	cqOff        cqringOffsets
}

// struct io_uring_getevents_arg
type geteventsArg struct {
	sigmask     uint64
	sigmaskSz   uint32
	minWaitUsec uint32
	ts          uint64
}

// struct io_uring_buf_reg
type bufReg struct {
	ringAddr    uint64
	ringEntries uint32
	bgid        uint16
	flags       uint16
	resv        [3]uint64
}

// struct io_uring_buf
type bufEntry struct {
	addr uint64
	len  uint32
	bid  uint16
	resv uint16 // for entry 0 this is the ring's tail
}

// struct io_uring_rsrc_register
type rsrcRegister struct {
	nr    uint32
	flags uint32
	resv2 uint64
	data  uint64
	tags  uint64
}

// struct io_uring_files_update / io_uring_rsrc_update
type rsrcUpdate struct {
	offset uint32
	resv   uint32
	data   uint64
}

// struct io_uring_probe_op
type probeOp struct {
	op    uint8
	resv  uint8
	flags uint16
	resv2 uint32
}
