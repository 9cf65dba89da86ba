//go:build linux

// Linux only: io_uring is a Linux interface.

package uring

import (
	"bytes"
	"errors"
	"math/rand"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// listenFd opens a blocking TCP listener on 127.0.0.1 with an ephemeral port.
func listenFd(t testing.TB) (int, *net.TCPAddr) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 512); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*unix.SockaddrInet4).Port}
}

// connPair returns the accepted fd (used through the ring) and the Go-side
// peer of one loopback TCP connection.
func connPair(t testing.TB) (int, *net.TCPConn) {
	t.Helper()
	lfd, addr := listenFd(t)
	peer, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	fd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd, peer.(*net.TCPConn)
}

func TestMultishotAccept(t *testing.T) {
	const clients = 200
	lockThread(t)
	r := newRing(t, 64, WithCQSize(512), WithDeferTaskrun())
	lfd, addr := listenFd(t)
	const acceptUD = 1
	arm := func() {
		s := r.GetSQE()
		s.PrepMultishotAccept(lfd, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
		s.SetUserData(acceptUD)
		if _, err := r.Submit(); err != nil {
			t.Fatal(err)
		}
	}
	arm()

	var wg sync.WaitGroup
	conns := make([]net.Conn, clients)
	dialErr := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
			if err != nil {
				dialErr <- err
				return
			}
			conns[i] = c
		}(i)
	}
	defer func() {
		wg.Wait()
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()

	accepted, rearms := 0, 0
	deadline := time.Now().Add(10 * time.Second)
	cqes := make([]*CQE, 32)
	for accepted < clients {
		select {
		case err := <-dialErr:
			t.Fatalf("dial: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("accepted %d of %d before the deadline", accepted, clients)
		}
		if _, err := r.SubmitAndWaitTimeout(1, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		n := r.PeekBatchCQE(cqes)
		rearm := false
		for _, c := range cqes[:n] {
			if c.UserData != acceptUD {
				t.Fatalf("unexpected CQE %+v", *c)
			}
			if c.Res < 0 {
				t.Fatalf("accept failed: %v", c.Err())
			}
			unix.Close(int(c.Res))
			accepted++
			if !c.More() {
				rearm = true
			}
		}
		r.CQAdvance(uint32(n))
		if rearm {
			rearms++
			arm()
		}
	}
	t.Logf("accepted %d connections, re-armed %d times", accepted, rearms)

	// Cancel the multishot accept by fd: it must end with a CQE without F_MORE.
	s := r.GetSQE()
	s.PrepCancelFd(lfd, 0)
	s.SetUserData(2)
	r.Submit()
	var cancelled, ended bool
	for !(cancelled && ended) {
		c := waitOne(t, r, 2*time.Second)
		switch {
		case c.UserData == 2:
			if c.Res < 0 {
				t.Fatalf("cancel: %v", errOf(c))
			}
			cancelled = true
		case c.UserData == acceptUD && !c.More():
			ended = true
		case c.UserData == acceptUD && c.Res >= 0:
			unix.Close(int(c.Res))
		}
	}
}

func TestRecvMultishotProvidedBuffers(t *testing.T) {
	const (
		nbufs   = 4
		bufSize = 64
		bgid    = 7
		recvUD  = 2
	)
	lockThread(t)
	r := newRing(t, 16, WithCQSize(64), WithDeferTaskrun())
	mem, err := unix.Mmap(-1, 0, nbufs*bufSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANONYMOUS|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	buf := func(bid uint16) []byte { return mem[int(bid)*bufSize : int(bid+1)*bufSize] }
	br, err := r.SetupBufRing(nbufs, bgid)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.FreeBufRing(br); err != nil {
			t.Errorf("FreeBufRing: %v", err)
		}
	}()
	if br.BGID() != bgid || br.Entries() != nbufs {
		t.Fatalf("BGID %d, Entries %d", br.BGID(), br.Entries())
	}
	for i := 0; i < nbufs; i++ {
		br.Add(buf(uint16(i)), uint16(i), i)
	}
	br.Advance(nbufs)

	fd, peer := connPair(t)
	arms := 0
	arm := func() {
		arms++
		s := r.GetSQE()
		s.PrepRecvMultishot(fd, nil, 0)
		s.SetFlags(SQEBufferSelect)
		s.SetBufGroup(bgid)
		s.SetUserData(recvUD)
		if _, err := r.Submit(); err != nil {
			t.Fatal(err)
		}
	}

	// receive reads until want bytes arrived (or EOF when want < 0).
	// recycleEarly gives each buffer back as soon as it is copied out;
	// otherwise buffers are held until the kernel runs dry (ENOBUFS).
	receive := func(want int, recycleEarly bool) (got []byte, enobufs int, eof bool) {
		var held []uint16
		recycleHeld := func() {
			for _, bid := range held {
				br.Recycle(buf(bid), bid)
			}
			held = held[:0]
		}
		deadline := time.Now().Add(5 * time.Second)
		for (want < 0 && !eof) || (want >= 0 && len(got) < want) {
			if time.Now().After(deadline) {
				t.Fatalf("received %d of %d bytes before the deadline", len(got), want)
			}
			c := waitOne(t, r, 5*time.Second)
			if c.UserData != recvUD {
				t.Fatalf("unexpected CQE %+v", c)
			}
			switch {
			case c.Res == -int32(unix.ENOBUFS):
				enobufs++
				if c.More() {
					t.Fatal("ENOBUFS CQE still has F_MORE")
				}
				recycleHeld()
				arm()
				continue
			case c.Res < 0:
				t.Fatalf("recv: %v", errOf(c))
			case c.Res == 0:
				eof = true
				if c.More() {
					t.Fatal("EOF CQE has F_MORE")
				}
				if bid, ok := c.BufferID(); ok {
					br.Recycle(buf(bid), bid)
				}
				continue
			}
			bid, ok := c.BufferID()
			if !ok || bid >= nbufs {
				t.Fatalf("CQE without a valid buffer: %+v", c)
			}
			got = append(got, buf(bid)[:c.Res]...)
			held = append(held, bid)
			if recycleEarly {
				recycleHeld()
			}
			if !c.More() {
				recycleHeld()
				arm()
			}
		}
		recycleHeld()
		return got, enobufs, eof
	}

	// Phase 1: 1000 bytes at once into 4x64 bytes of buffers, nothing
	// recycled until the kernel reports ENOBUFS.
	payload := make([]byte, 1000)
	rand.New(rand.NewSource(1)).Read(payload)
	arm()
	if _, err := peer.Write(payload); err != nil {
		t.Fatal(err)
	}
	got, enobufs, _ := receive(len(payload), false)
	if !bytes.Equal(got, payload) {
		t.Fatal("phase 1: data corrupted or reordered")
	}
	if enobufs == 0 {
		t.Fatal("phase 1: never saw ENOBUFS with 256 bytes of buffers for 1000 bytes")
	}
	t.Logf("phase 1: %d ENOBUFS, %d arms", enobufs, arms)

	// Phase 2: small writes, buffers recycled promptly.
	payload2 := make([]byte, 600)
	rand.New(rand.NewSource(2)).Read(payload2)
	go func() {
		for off := 0; off < len(payload2); off += 50 {
			peer.Write(payload2[off : off+50])
			time.Sleep(time.Millisecond)
		}
	}()
	got, enobufs, _ = receive(len(payload2), true)
	if !bytes.Equal(got, payload2) {
		t.Fatal("phase 2: data corrupted or reordered")
	}
	t.Logf("phase 2: %d ENOBUFS, %d arms", enobufs, arms)

	// Phase 3: the peer closes; the multishot recv ends with res 0, no F_MORE.
	peer.CloseWrite()
	if _, _, eof := receive(-1, true); !eof {
		t.Fatal("no EOF")
	}
}

func TestPartialSendContinues(t *testing.T) {
	r := newRing(t, 8)
	fd, peer := connPair(t)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
		t.Fatal(err)
	}

	data := make([]byte, 1<<20) // heap, referenced until the last CQE
	rand.New(rand.NewSource(3)).Read(data)
	recvd := make(chan []byte, 1)
	go func() {
		var out []byte
		chunk := make([]byte, 16384)
		peer.SetReadDeadline(time.Now().Add(20 * time.Second))
		for len(out) < len(data) {
			n, err := peer.Read(chunk)
			out = append(out, chunk[:n]...)
			if err != nil {
				break
			}
			time.Sleep(100 * time.Microsecond) // a slow reader
		}
		recvd <- out
	}()

	off, sends, partial := 0, 0, 0
	for off < len(data) {
		s := r.GetSQE()
		s.PrepSend(fd, data[off:], unix.MSG_NOSIGNAL)
		s.SetUserData(3)
		c := waitN(t, r, 1, 10*time.Second)[3]
		if c.Res <= 0 {
			t.Fatalf("send: %+v", c)
		}
		if int(c.Res) < len(data)-off {
			partial++
		}
		off += int(c.Res)
		sends++
	}
	runtime.KeepAlive(data)
	out := <-recvd
	if !bytes.Equal(out, data) {
		t.Fatalf("peer got %d bytes, mismatch", len(out))
	}
	if partial == 0 {
		t.Fatal("no partial send happened; the test did not exercise continuation")
	}
	t.Logf("%d sends, %d partial", sends, partial)
}

func TestLinkTimeout(t *testing.T) {
	r := newRing(t, 8)
	for _, tc := range []struct {
		name               string
		dataFirst          bool
		wantRecv, wantTime unix.Errno // 0: success
	}{
		{"fires_and_cancels_recv", false, unix.ECANCELED, unix.ETIME},
		{"recv_wins", true, 0, unix.ECANCELED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, peer := connPair(t)
			if tc.dataFirst {
				peer.Write([]byte("x"))
			}
			buf := make([]byte, 64)
			ts := &unix.Timespec{Nsec: int64(30 * time.Millisecond)}
			s := r.GetSQE()
			s.PrepRecv(fd, buf, 0)
			s.SetFlags(SQEIOLink)
			s.SetUserData(1)
			s = r.GetSQE()
			s.PrepLinkTimeout(ts, 0)
			s.SetUserData(2)
			got := waitN(t, r, 2, 2*time.Second)
			check := func(c CQE, want unix.Errno) {
				if want == 0 && c.Res < 0 || want != 0 && errOf(c) != want {
					t.Errorf("ud %d: res %d (%v), want %v", c.UserData, c.Res, errOf(c), want)
				}
			}
			check(got[1], tc.wantRecv)
			check(got[2], tc.wantTime)
			runtime.KeepAlive(buf)
			runtime.KeepAlive(ts)
		})
	}
}

func TestCancel(t *testing.T) {
	r := newRing(t, 8)
	for _, tc := range []struct {
		name string
		prep func(s *SQE, fd int)
	}{
		{"user_data", func(s *SQE, fd int) { s.PrepCancel(10, 0) }},
		{"user_data_all", func(s *SQE, fd int) { s.PrepCancel(10, AsyncCancelAll) }},
		{"fd", func(s *SQE, fd int) { s.PrepCancelFd(fd, 0) }},
		{"fd_all", func(s *SQE, fd int) { s.PrepCancelFd(fd, AsyncCancelAll) }},
		{"any", func(s *SQE, fd int) { s.PrepCancelAny() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, _ := connPair(t)
			buf := make([]byte, 64)
			s := r.GetSQE()
			s.PrepRecv(fd, buf, 0)
			s.SetUserData(10)
			r.Submit()
			if _, err := r.WaitCQETimeout(10 * time.Millisecond); !errors.Is(err, unix.ETIME) {
				t.Fatalf("recv completed without data: %v", err)
			}
			s = r.GetSQE()
			tc.prep(s, fd)
			s.SetUserData(11)
			got := waitN(t, r, 2, 2*time.Second)
			if errOf(got[10]) != unix.ECANCELED {
				t.Fatalf("recv: %+v", got[10])
			}
			if got[11].Res < 0 {
				t.Fatalf("cancel: %v", errOf(got[11]))
			}
			runtime.KeepAlive(buf)
		})
	}
	// Nothing to cancel: ENOENT.
	s := r.GetSQE()
	s.PrepCancel(12345, 0)
	s.SetUserData(1)
	if c := waitN(t, r, 1, time.Second)[1]; errOf(c) != unix.ENOENT {
		t.Fatalf("cancel of nothing: %+v", c)
	}
}

func TestSocketConnectMsgShutdownClose(t *testing.T) {
	r := newRing(t, 16)
	p, _ := r.Probe()
	if !p.Supported(OpSocket) {
		t.Skip("no IORING_OP_SOCKET")
	}
	lfd, addr := listenFd(t)

	s := r.GetSQE()
	s.PrepSocket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0, 0)
	s.SetUserData(1)
	c := waitN(t, r, 1, time.Second)[1]
	if c.Res < 0 {
		t.Fatalf("socket: %v", errOf(c))
	}
	cfd := int(c.Res)

	sa := new(unix.RawSockaddrInet4) // heap: the kernel reads it asynchronously
	sa.Family = unix.AF_INET
	sa.Addr = [4]byte{127, 0, 0, 1}
	// sin_port is big-endian in memory.
	(*[2]byte)(unsafe.Pointer(&sa.Port))[0] = byte(addr.Port >> 8)
	(*[2]byte)(unsafe.Pointer(&sa.Port))[1] = byte(addr.Port)
	s = r.GetSQE()
	s.PrepConnect(cfd, (*unix.RawSockaddrAny)(unsafe.Pointer(sa)), unix.SizeofSockaddrInet4)
	s.SetUserData(2)
	s = r.GetSQE()
	s.PrepAccept(lfd, unix.SOCK_CLOEXEC)
	s.SetUserData(3)
	got := waitN(t, r, 2, 2*time.Second)
	if got[2].Res != 0 || got[3].Res < 0 {
		t.Fatalf("connect/accept: %+v", got)
	}
	afd := int(got[3].Res)
	runtime.KeepAlive(sa)

	// sendmsg -> recvmsg with two iovecs each side.
	a, b := []byte("hello "), []byte("msghdr")
	siov := []unix.Iovec{{Base: &a[0]}, {Base: &b[0]}}
	siov[0].SetLen(len(a))
	siov[1].SetLen(len(b))
	smsg := &unix.Msghdr{Iov: &siov[0]}
	smsg.SetIovlen(2)
	rbuf := make([]byte, 32)
	riov := []unix.Iovec{{Base: &rbuf[0]}}
	riov[0].SetLen(12) // exactly what is sent: MSG_WAITALL waits for a full iovec
	rmsg := &unix.Msghdr{Iov: &riov[0]}
	rmsg.SetIovlen(1)
	s = r.GetSQE()
	s.PrepSendmsg(cfd, smsg, unix.MSG_NOSIGNAL)
	s.SetUserData(4)
	s = r.GetSQE()
	s.PrepRecvmsg(afd, rmsg, unix.MSG_WAITALL)
	s.SetUserData(5)
	got = waitN(t, r, 2, 2*time.Second)
	if got[4].Res != 12 || got[5].Res != 12 || string(rbuf[:12]) != "hello msghdr" {
		t.Fatalf("sendmsg/recvmsg: %+v %q", got, rbuf)
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(siov)
	runtime.KeepAlive(riov)
	runtime.KeepAlive(smsg)
	runtime.KeepAlive(rmsg)

	// Zero-copy send: a result CQE with F_MORE, then a notification.
	if p.Supported(OpSendZC) {
		zc := []byte("zerocopy")
		s = r.GetSQE()
		s.PrepSendZC(cfd, zc, unix.MSG_NOSIGNAL, 0)
		s.SetUserData(6)
		r.Submit()
		first := waitOne(t, r, 2*time.Second)
		if first.Res != int32(len(zc)) || !first.More() {
			t.Fatalf("send_zc result %+v", first)
		}
		notif := waitOne(t, r, 2*time.Second)
		if notif.UserData != 6 || notif.Flags&CQEFNotif == 0 {
			t.Fatalf("send_zc notification %+v", notif)
		}
		runtime.KeepAlive(zc)
		tmp := make([]byte, len(zc))
		s = r.GetSQE()
		s.PrepRecv(afd, tmp, unix.MSG_WAITALL)
		s.SetUserData(7)
		if c := waitN(t, r, 1, time.Second)[7]; c.Res != int32(len(zc)) || string(tmp) != "zerocopy" {
			t.Fatalf("recv after zc: %+v %q", c, tmp)
		}
	}

	// shutdown(SHUT_WR) -> the peer reads EOF.
	s = r.GetSQE()
	s.PrepShutdown(cfd, unix.SHUT_WR)
	s.SetUserData(8)
	s.SetFlags(SQEIOLink)
	s = r.GetSQE()
	s.PrepRecv(afd, rbuf, 0)
	s.SetUserData(9)
	got = waitN(t, r, 2, 2*time.Second)
	if got[8].Res != 0 || got[9].Res != 0 {
		t.Fatalf("shutdown/EOF: %+v", got)
	}

	for i, fd := range []int{cfd, afd} {
		s = r.GetSQE()
		s.PrepClose(fd)
		s.SetUserData(uint64(20 + i))
	}
	got = waitN(t, r, 2, time.Second)
	if got[20].Res != 0 || got[21].Res != 0 {
		t.Fatalf("close: %+v", got)
	}
}

// With DEFER_TASKRUN a completion triggered by the network (not inline
// with submission) sits as task work until the issuer enters the kernel.
// PeekBatchCQE alone must find it, via IORING_SQ_TASKRUN.
func TestDeferTaskrunPeekFlushes(t *testing.T) {
	lockThread(t)
	r := newRing(t, 8, WithDeferTaskrun())
	fd, peer := connPair(t)
	buf := make([]byte, 16)
	s := r.GetSQE()
	s.PrepRecv(fd, buf, 0)
	s.SetUserData(5)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	cqes := make([]*CQE, 4)
	deadline := time.Now().Add(2 * time.Second)
	for {
		if n := r.PeekBatchCQE(cqes); n > 0 {
			if n != 1 || cqes[0].UserData != 5 || cqes[0].Res != 4 || string(buf[:4]) != "ping" {
				t.Fatalf("CQE %+v buf %q", *cqes[0], buf)
			}
			r.CQAdvance(1)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("PeekBatchCQE never surfaced the deferred completion")
		}
		time.Sleep(time.Millisecond)
	}
	runtime.KeepAlive(buf)
	if err := r.GetEvents(); err != nil {
		t.Fatal(err)
	}
}

// TestRecvIncrementalBuffers: on a ring set up with SetupBufRingInc a
// receive takes only the bytes it got from the buffer at the head, the
// next goes on after them in the same buffer (CQEFBufMore while some is
// left), and the one that reaches its end moves the ring to the next.
func TestRecvIncrementalBuffers(t *testing.T) {
	const bufSize, bgid, recvUD = 64, 3, 9
	lockThread(t)
	r := newRing(t, 8, WithDeferTaskrun())
	mem, err := unix.Mmap(-1, 0, 2*bufSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANONYMOUS|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	br, err := r.SetupBufRingInc(2, bgid)
	if errors.Is(err, unix.EINVAL) {
		t.Skip("kernel without IOU_PBUF_RING_INC (Linux 6.12+)")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.FreeBufRing(br)
	br.Add(mem[:bufSize], 0, 0)
	br.Add(mem[bufSize:], 1, 1)
	br.Advance(2)

	fd, peer := connPair(t)
	recv := func(msg string) *CQE {
		t.Helper()
		if msg != "" {
			if _, err := peer.Write([]byte(msg)); err != nil {
				t.Fatal(err)
			}
		}
		s := r.GetSQE()
		s.PrepRecv(fd, nil, 0)
		s.SetFlags(SQEBufferSelect)
		s.SetBufGroup(bgid)
		s.SetUserData(recvUD)
		if _, err := r.Submit(); err != nil {
			t.Fatal(err)
		}
		c := waitOne(t, r, 5*time.Second)
		if c.Res != int32(len(msg)) {
			t.Fatalf("recv of %q: res %d", msg, c.Res)
		}
		return &c
	}
	first := bytes.Repeat([]byte("a"), 10)
	rest := bytes.Repeat([]byte("b"), bufSize-len(first))
	for _, step := range []struct {
		msg  []byte
		bid  uint16
		more bool
		off  int
	}{
		{first, 0, true, 0},
		{rest, 0, false, len(first)},
		{[]byte("c"), 1, true, bufSize},
	} {
		c := recv(string(step.msg))
		bid, ok := c.BufferID()
		if !ok || bid != step.bid || c.BufMore() != step.more {
			t.Fatalf("recv of %d bytes: buffer %d (%v), BufMore %v; want %d, %v", len(step.msg), bid, ok, c.BufMore(), step.bid, step.more)
		}
		if got := mem[step.off : step.off+len(step.msg)]; !bytes.Equal(got, step.msg) {
			t.Fatalf("bytes at %d: %q, want %q", step.off, got, step.msg)
		}
	}
	// The peer's FIN: a receive of 0 bytes names no buffer, and the one
	// under way stays the kernel's (the net backend keeps its reference).
	if err := peer.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if c := recv(""); c.Res != 0 || c.Flags&CQEFBuffer != 0 {
		t.Fatalf("recv at EOF: res %d, flags %#x; want 0 and no buffer", c.Res, c.Flags)
	}
}
