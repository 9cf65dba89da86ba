//go:build linux

package uring

// Opcodes (enum io_uring_op in include/uapi/linux/io_uring.h).
const (
	OpNop uint8 = iota
	OpReadv
	OpWritev
	OpFsync
	OpReadFixed
	OpWriteFixed
	OpPollAdd
	OpPollRemove
	OpSyncFileRange
	OpSendmsg
	OpRecvmsg
	OpTimeout
	OpTimeoutRemove
	OpAccept
	OpAsyncCancel
	OpLinkTimeout
	OpConnect
	OpFallocate
	OpOpenat
	OpClose
	OpFilesUpdate
	OpStatx
	OpRead
	OpWrite
	OpFadvise
	OpMadvise
	OpSend
	OpRecv
	OpOpenat2
	OpEpollCtl
	OpSplice
	OpProvideBuffers
	OpRemoveBuffers
	OpTee
	OpShutdown
	OpRenameat
	OpUnlinkat
	OpMkdirat
	OpSymlinkat
	OpLinkat
	OpMsgRing
	OpFsetxattr
	OpSetxattr
	OpFgetxattr
	OpGetxattr
	OpSocket
	OpUringCmd
	OpSendZC
	OpSendmsgZC
	OpReadMultishot
	OpWaitid
	OpFutexWait
	OpFutexWake
	OpFutexWaitv
	OpFixedFdInstall
	OpFtruncate
	OpBind
	OpListen
	OpRecvZC
	OpEpollWait
	OpReadvFixed
	OpWritevFixed
	OpPipe
)

// SQE flags (io_uring_sqe.flags).
const (
	SQEFixedFile      uint8 = 1 << 0 // IOSQE_FIXED_FILE: fd is an index into the registered file table
	SQEIODrain        uint8 = 1 << 1 // IOSQE_IO_DRAIN
	SQEIOLink         uint8 = 1 << 2 // IOSQE_IO_LINK
	SQEIOHardlink     uint8 = 1 << 3 // IOSQE_IO_HARDLINK
	SQEAsync          uint8 = 1 << 4 // IOSQE_ASYNC
	SQEBufferSelect   uint8 = 1 << 5 // IOSQE_BUFFER_SELECT: pick a buffer from the group in buf_group
	SQECQESkipSuccess uint8 = 1 << 6 // IOSQE_CQE_SKIP_SUCCESS
)

// CQE flags (io_uring_cqe.flags).
const (
	CQEFBuffer       uint32 = 1 << 0 // IORING_CQE_F_BUFFER: upper 16 bits hold the buffer id
	CQEFMore         uint32 = 1 << 1 // IORING_CQE_F_MORE: the request stays armed, more CQEs follow
	CQEFSockNonempty uint32 = 1 << 2 // IORING_CQE_F_SOCK_NONEMPTY
	CQEFNotif        uint32 = 1 << 3 // IORING_CQE_F_NOTIF: zero-copy send notification
	CQEFBufMore      uint32 = 1 << 4 // IORING_CQE_F_BUF_MORE: incremental buffer not fully consumed

	CQEBufferShift = 16 // IORING_CQE_BUFFER_SHIFT
)

// Setup flags (io_uring_params.flags).
const (
	SetupIOPoll           uint32 = 1 << 0
	SetupSQPoll           uint32 = 1 << 1
	SetupSQAff            uint32 = 1 << 2
	SetupCQSize           uint32 = 1 << 3
	SetupClamp            uint32 = 1 << 4
	SetupAttachWQ         uint32 = 1 << 5
	SetupRDisabled        uint32 = 1 << 6
	SetupSubmitAll        uint32 = 1 << 7
	SetupCoopTaskrun      uint32 = 1 << 8
	SetupTaskrunFlag      uint32 = 1 << 9
	SetupSQE128           uint32 = 1 << 10
	SetupCQE32            uint32 = 1 << 11
	SetupSingleIssuer     uint32 = 1 << 12
	SetupDeferTaskrun     uint32 = 1 << 13
	SetupNoMmap           uint32 = 1 << 14
	SetupRegisteredFdOnly uint32 = 1 << 15
	SetupNoSQArray        uint32 = 1 << 16
	SetupHybridIOPoll     uint32 = 1 << 17
)

// Feature bits reported by the kernel (io_uring_params.features).
const (
	FeatSingleMmap     uint32 = 1 << 0
	FeatNoDrop         uint32 = 1 << 1
	FeatSubmitStable   uint32 = 1 << 2
	FeatRWCurPos       uint32 = 1 << 3
	FeatCurPersonality uint32 = 1 << 4
	FeatFastPoll       uint32 = 1 << 5
	FeatPoll32Bits     uint32 = 1 << 6
	FeatSQPollNonfixed uint32 = 1 << 7
	FeatExtArg         uint32 = 1 << 8
	FeatNativeWorkers  uint32 = 1 << 9
	FeatRsrcTags       uint32 = 1 << 10
	FeatCQESkip        uint32 = 1 << 11
	FeatLinkedFile     uint32 = 1 << 12
	FeatRegRegRing     uint32 = 1 << 13
	FeatRecvsendBundle uint32 = 1 << 14
	FeatMinTimeout     uint32 = 1 << 15
)

// io_uring_enter flags.
const (
	EnterGetevents      uint32 = 1 << 0
	EnterSQWakeup       uint32 = 1 << 1
	EnterSQWait         uint32 = 1 << 2
	EnterExtArg         uint32 = 1 << 3
	EnterRegisteredRing uint32 = 1 << 4
	EnterAbsTimer       uint32 = 1 << 5
)

// SQ ring flags (kernel-written word at sq_off.flags).
const (
	SQNeedWakeup uint32 = 1 << 0 // IORING_SQ_NEED_WAKEUP: SQPOLL thread sleeps
	SQCQOverflow uint32 = 1 << 1 // IORING_SQ_CQ_OVERFLOW: CQEs wait in the overflow list
	SQTaskrun    uint32 = 1 << 2 // IORING_SQ_TASKRUN: task work pending, enter with GETEVENTS
)

// send/recv flags, carried in sqe.ioprio.
const (
	RecvsendPollFirst uint16 = 1 << 0 // IORING_RECVSEND_POLL_FIRST
	RecvMultishot     uint16 = 1 << 1 // IORING_RECV_MULTISHOT
	RecvsendFixedBuf  uint16 = 1 << 2 // IORING_RECVSEND_FIXED_BUF
	SendZCReportUsage uint16 = 1 << 3 // IORING_SEND_ZC_REPORT_USAGE
	RecvsendBundle    uint16 = 1 << 4 // IORING_RECVSEND_BUNDLE
)

// accept flags, carried in sqe.ioprio.
const (
	AcceptMultishot uint16 = 1 << 0 // IORING_ACCEPT_MULTISHOT
	AcceptDontwait  uint16 = 1 << 1 // IORING_ACCEPT_DONTWAIT
	AcceptPollFirst uint16 = 1 << 2 // IORING_ACCEPT_POLL_FIRST
)

// Timeout flags (sqe.timeout_flags).
const (
	TimeoutAbs          uint32 = 1 << 0
	TimeoutUpdate       uint32 = 1 << 1
	TimeoutBoottime     uint32 = 1 << 2
	TimeoutRealtime     uint32 = 1 << 3
	LinkTimeoutUpdate   uint32 = 1 << 4
	TimeoutETimeSuccess uint32 = 1 << 5
	TimeoutMultishot    uint32 = 1 << 6
)

// Cancel flags (sqe.cancel_flags).
const (
	AsyncCancelAll      uint32 = 1 << 0 // cancel every matching request, not just the first
	AsyncCancelFd       uint32 = 1 << 1 // match on fd instead of user_data
	AsyncCancelAny      uint32 = 1 << 2 // match any request
	AsyncCancelFdFixed  uint32 = 1 << 3 // fd is a registered file index
	AsyncCancelUserdata uint32 = 1 << 4
	AsyncCancelOp       uint32 = 1 << 5
)

// Poll flags (carried in sqe.len for POLL_ADD / POLL_REMOVE).
const (
	PollAddMulti       uint32 = 1 << 0
	PollUpdateEvents   uint32 = 1 << 1
	PollUpdateUserData uint32 = 1 << 2
	PollAddLevel       uint32 = 1 << 3
)

// MSG_RING: command in sqe.addr, flags in sqe.msg_ring_flags.
const (
	MsgData          uint64 = 0 // IORING_MSG_DATA
	MsgSendFd        uint64 = 1 // IORING_MSG_SEND_FD
	MsgRingCQESkip   uint32 = 1 << 0
	MsgRingFlagsPass uint32 = 1 << 1
)

// SpliceFFdInFixed marks splice's fdIn as a registered file index.
const SpliceFFdInFixed uint32 = 1 << 31

// io_uring_register opcodes.
const (
	registerBuffers        = 0
	unregisterBuffers      = 1
	registerFiles          = 2
	unregisterFiles        = 3
	registerEventfd        = 4
	unregisterEventfd      = 5
	registerFilesUpdate    = 6
	registerEventfdAsync   = 7
	registerProbe          = 8
	registerPersonality    = 9
	unregisterPersonality  = 10
	registerRestrictions   = 11
	registerEnableRings    = 12
	registerFiles2         = 13
	registerFilesUpdate2   = 14
	registerBuffers2       = 15
	registerBuffersUpdate  = 16
	registerIOWQAff        = 17
	unregisterIOWQAff      = 18
	registerIOWQMaxWorkers = 19
	registerRingFds        = 20
	unregisterRingFds      = 21
	registerPbufRing       = 22
	pbufRingInc            = 2 // IOU_PBUF_RING_INC: io_uring_buf_reg.flags
	unregisterPbufRing     = 23
	registerSyncCancel     = 24
	registerFileAllocRange = 25
)

// mmap offsets.
const (
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000
)

const (
	rsrcRegisterSparse = 1 << 0
	probeOpSupported   = 1 << 0
)
