package net

// packetOptions configure a server's datagram sockets.
type packetOptions struct {
	bufSize  int  // receive buffer per datagram
	batch    int  // datagrams per recvmmsg
	maxQueue int  // bytes of queued output per socket
	gso, gro bool // use the kernel's offloads where it has them
	rcvBuf   int  // SO_RCVBUF wish
	sndBuf   int  // SO_SNDBUF wish
}

func defaultPacketOptions() packetOptions {
	return packetOptions{
		bufSize:  64 << 10,
		batch:    16,
		maxQueue: 1 << 20,
		gso:      true,
		gro:      true,
		rcvBuf:   4 << 20,
		sndBuf:   4 << 20,
	}
}

// WithPacketBuffer sets the receive buffer per datagram of datagram
// sockets (default 64 KiB, which holds any UDP datagram and a GRO batch).
// A datagram longer than it is cut by the kernel and dropped, counted in
// PacketStats.Truncated. Each loop with datagram sockets holds one buffer
// per datagram of its receive batch (WithPacketBatch): 1 MiB by default on
// epoll; 4 MiB of mmap'd ring on io_uring, of which only the pages
// datagrams reach are touched.
// Below 64 KiB, GRO stays off (a coalesced receive would not fit).
func WithPacketBuffer(size int) Option {
	return func(o *options) { o.pkt.bufSize = max(size, 1) }
}

// WithPacketBatch sets how many datagrams a loop takes per receive system
// call on epoll (recvmmsg). Default 16; at most 1024. On io_uring, where
// the kernel receives into a ring of buffers, the ring holds four batches
// (64 buffers by default).
func WithPacketBatch(n int) Option {
	return func(o *options) { o.pkt.batch = min(max(n, 1), 1024) }
}

// WithMaxPacketQueue bounds a datagram socket's queued output, in bytes
// (each datagram counts 128 bytes more than its payload). Default 1 MiB.
// UDP has no backpressure, so a datagram that would pass the bound is
// dropped and counted (PacketStats.Dropped) and WriteTo returns
// ErrPacketQueueFull. The queue empties every loop iteration unless the
// socket's send buffer is full.
func WithMaxPacketQueue(bytes int) Option {
	return func(o *options) { o.pkt.maxQueue = max(bytes, 1) }
}

// WithUDPOffload turns the kernel's UDP segmentation offloads on or off
// (default on where the kernel has them): gso sends a run of same-size
// datagrams to one peer as one buffer the kernel splits (UDP_SEGMENT,
// Linux 4.18); gro has the kernel coalesce datagrams of one flow into one
// receive, which the loop splits again before OnPacket (UDP_GRO, Linux
// 5.0). Either is probed per socket and left off where the kernel refuses
// it; PacketStats.GSO and GRO say what a socket uses.
func WithUDPOffload(gso, gro bool) Option {
	return func(o *options) { o.pkt.gso, o.pkt.gro = gso, gro }
}

// WithPacketSocketBuffers sets the kernel's receive and send buffer sizes
// (SO_RCVBUF, SO_SNDBUF) of datagram sockets; default 4 MiB each, capped
// by the kernel at net.core.rmem_max and wmem_max. 0 keeps the kernel's
// default. A burst larger than the receive buffer is dropped by the kernel
// before the loop sees it and counted in PacketStats.KernelDrops; the
// package doc ("Datagram receive buffers") says how to size it.
func WithPacketSocketBuffers(rcv, snd int) Option {
	return func(o *options) { o.pkt.rcvBuf, o.pkt.sndBuf = rcv, snd }
}
