//go:build windows

package net

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"unsafe"

	"github.com/veloq/veloq/internal/sock"
)

// Datagrams on Windows: the socket is net's *net.UDPConn behind a handle
// (internal/sock), and a Read there cannot be made non-blocking, so the
// backend's goroutine does the blocking receive, one datagram at a time,
// into the socket's inbox and reports it ready; the loop's receive
// (mmsg) takes it from there and lets the goroutine read the next. Sends
// go from the loop with WriteTo (a UDP send waits only for the socket
// buffer, briefly), so the output watch reports room at once.

// wsaemsgsize is WSAEMSGSIZE: the datagram was larger than the buffer,
// which holds its first bytes.
const wsaemsgsize = syscall.Errno(10040)

// msgTrunc flags a received datagram cut to its buffer (MSG_TRUNC's
// value in Winsock).
const msgTrunc = 0x100

// msghdr is one datagram's header in a batch, shaped as unix.Msghdr is
// (the loop's batch code fills it); only mmsg below reads it.
type msghdr struct {
	Name       *byte
	Namelen    uint32
	Iov        *iovec
	Iovlen     uint64
	Control    *byte
	Controllen uint64
	Flags      int32
}

// SetControllen sets the control buffer's length, as unix.Msghdr's does.
func (h *msghdr) SetControllen(n int) { h.Controllen = uint64(n) }

// mmsghdr is one message of a batch: the header and the bytes it moved.
type mmsghdr struct {
	Hdr msghdr
	Len uint32
}

// The sizes of the sockaddrs kept in a batch, in Linux's layout
// (udp_mmsg.go writes and reads them; no Windows call sees them).
const (
	sizeofSockaddrInet4 = 16
	sizeofSockaddrInet6 = 28
	sizeofSockaddrUnix  = 110
)

// inbox is one datagram the goroutine received and the loop has not
// taken yet.
type inbox struct {
	mu    sync.Mutex
	full  bool
	buf   []byte
	n     int
	trunc bool
	from  netip.AddrPort
	next  chan struct{} // the loop took it: receive the next
}

// grant lets the goroutine receive the next datagram. At most one grant
// is outstanding (the goroutine waits for each), so the send never waits;
// select keeps the loop safe if that ever changed.
func (in *inbox) grant() {
	select {
	case in.next <- struct{}{}:
	default:
	}
}

// inboxes maps a datagram socket's handle to its inbox, for mmsg.
var inboxes sync.Map

type ppkt struct {
	fd   int
	uc   *net.UDPConn
	in   *inbox
	done chan struct{}
	wg   sync.WaitGroup
}

func (b *portableBackend) openPacket(idx uint32, fd int, _ packetRecv) error {
	for int(idx) >= len(b.pkts) {
		b.pkts = append(b.pkts, nil)
	}
	uc, ok := sock.Get(fd).(*net.UDPConn)
	if !ok {
		return errors.New("veloq: portable backend: the handle is not a UDP socket")
	}
	in := &inbox{buf: make([]byte, 64<<10), next: make(chan struct{}, 1)}
	p := &ppkt{fd: fd, uc: uc, in: in, done: make(chan struct{})}
	inboxes.Store(fd, in)
	b.pkts[idx] = p
	p.wg.Add(1)
	go b.packetWaiter(idx, p)
	return nil
}

// packetWaiter receives one datagram into the inbox, reports it, and
// waits until the loop has taken it (or, after an error, seen it).
func (b *portableBackend) packetWaiter(idx uint32, p *ppkt) {
	defer p.wg.Done()
	in := p.in
	for {
		n, _, _, from, err := p.uc.ReadMsgUDPAddrPort(in.buf, nil)
		select {
		case <-p.done:
			return
		default:
		}
		var errno syscall.Errno
		trunc := errors.Is(err, wsaemsgsize)
		if err != nil && !trunc {
			if !errors.As(err, &errno) {
				errno = syscall.EIO
			}
		} else {
			in.mu.Lock()
			in.full, in.n, in.trunc, in.from = true, n, trunc, from
			in.mu.Unlock()
		}
		b.post(func() {
			if b.pkts[idx] != p {
				return
			}
			if errno != 0 {
				b.ev.packetError(idx, errno)
				in.grant()
				return
			}
			b.ev.packetReady(idx, false)
		})
		select {
		case <-in.next:
		case <-p.done:
			return
		}
	}
}

func (b *portableBackend) packetRead([]byte) {}

// watchPacketOut: sends never answer EAGAIN here (see above), so there is
// room at once.
func (b *portableBackend) watchPacketOut(idx uint32) {
	p := b.pkts[idx]
	b.post(func() {
		if p != nil && b.pkts[idx] == p {
			b.ev.packetReady(idx, true)
		}
	})
}

// mmsg receives the inbox's datagram into hdrs[0] (recv), or sends each
// of hdrs with WriteTo (to the connected peer when it has no address).
// Like recvmmsg, it returns how many messages it moved, and the error
// only if it moved none.
func mmsg(recv bool, fd int, hdrs []mmsghdr) (int, syscall.Errno) {
	if recv {
		return takeInbox(fd, hdrs)
	}
	uc, ok := sock.Get(fd).(*net.UDPConn)
	if !ok {
		return 0, syscall.EBADF
	}
	for i := range hdrs {
		h := &hdrs[i].Hdr
		// Sound: the loop set Iov and Name to heap buffers of the lengths
		// recorded beside them, which the batch keeps alive.
		p := unsafe.Slice(h.Iov.Base, h.Iov.Len)
		var n int
		var err error
		if h.Namelen > 0 {
			to := getSockaddr(unsafe.Slice(h.Name, h.Namelen), h.Namelen)
			n, err = uc.WriteToUDPAddrPort(p, to)
		} else {
			n, err = uc.Write(p)
		}
		if err != nil {
			if i > 0 {
				return i, 0
			}
			var e syscall.Errno
			if !errors.As(err, &e) {
				e = syscall.EIO
			}
			return 0, e
		}
		hdrs[i].Len = uint32(n)
	}
	return len(hdrs), 0
}

// takeInbox moves handle fd's waiting datagram into hdrs[0]; EAGAIN when
// there is none.
func takeInbox(fd int, hdrs []mmsghdr) (int, syscall.Errno) {
	v, ok := inboxes.Load(fd)
	if !ok || len(hdrs) == 0 {
		return 0, syscall.EAGAIN
	}
	in := v.(*inbox)
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.full {
		return 0, syscall.EAGAIN
	}
	h := &hdrs[0].Hdr
	// Sound: as in mmsg.
	p := unsafe.Slice(h.Iov.Base, h.Iov.Len)
	n := copy(p, in.buf[:in.n])
	h.Flags = 0
	if in.trunc || n < in.n {
		h.Flags = msgTrunc
	}
	h.Controllen = 0
	family := syscall.AF_INET6
	if in.from.Addr().Unmap().Is4() {
		family = syscall.AF_INET
	}
	h.Namelen = putSockaddr((*[sockaddrLen]byte)(unsafe.Slice(h.Name, sockaddrLen)), family,
		netip.AddrPortFrom(in.from.Addr().Unmap(), in.from.Port()))
	hdrs[0].Len = uint32(n)
	in.full = false
	in.grant()
	return 1, 0
}

// interrupt ends a waiting receive.
func (p *ppkt) interrupt() { _ = p.uc.Close() }

// forget drops the socket's inbox, on the loop before its key closes.
func (p *ppkt) forget() { inboxes.Delete(p.fd) }
