//go:build linux

// Linux only: io_uring is a Linux interface.

package uring

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A multishot recvmsg on a UDP socket fills one provided buffer per
// datagram with the header, the sender's address and the payload, stays
// armed across datagrams, and flags a datagram longer than the buffer's
// payload room as truncated.
func TestRecvmsgMultishotUDP(t *testing.T) {
	const (
		nbufs  = 4
		room   = 64 // payload room per buffer
		bgid   = 3
		recvUD = 9
	)
	lockThread(t)
	r := newRing(t, 16, WithCQSize(64), WithDeferTaskrun())
	msg := &unix.Msghdr{Namelen: unix.SizeofSockaddrInet6}
	bufSize := SizeofRecvmsgOut + int(msg.Namelen) + room
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
	defer r.FreeBufRing(br)
	for i := 0; i < nbufs; i++ {
		br.Add(buf(uint16(i)), uint16(i), i)
	}
	br.Advance(nbufs)

	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(fd)
	to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*unix.SockaddrInet4).Port}
	peer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	from := peer.LocalAddr().(*net.UDPAddr)

	arm := func() {
		s := r.GetSQE()
		s.PrepRecvmsgMultishot(fd, msg, 0, bgid)
		s.SetUserData(recvUD)
		if _, err := r.Submit(); err != nil {
			t.Fatal(err)
		}
	}
	arm()
	cases := []struct {
		payload   []byte
		truncated bool
	}{
		{[]byte("first"), false},
		{nil, false}, // an empty datagram is a datagram
		{bytes.Repeat([]byte{'x'}, room), false},
		{bytes.Repeat([]byte{'y'}, room+10), true},
	}
	for i, c := range cases {
		if _, err := peer.WriteToUDP(c.payload, to); err != nil {
			t.Fatal(err)
		}
		rearm := false
		cqe := waitOne(t, r, 5*time.Second)
		if cqe.UserData != recvUD || cqe.Res < 0 {
			t.Fatalf("datagram %d: CQE %+v", i, cqe)
		}
		if !cqe.More() {
			// The kernel ends a multishot receive on a zero-length
			// payload, as on a stream's EOF, even for a datagram (seen on
			// Linux 6.18): the caller re-arms.
			if len(c.payload) != 0 {
				t.Fatalf("datagram %d: the multishot recvmsg ended: %+v", i, cqe)
			}
			rearm = true
		}
		bid, ok := cqe.BufferID()
		if !ok {
			t.Fatalf("datagram %d: no buffer", i)
		}
		out, name, _, payload, ok := ParseRecvmsg(buf(bid), int(cqe.Res), msg)
		if !ok {
			t.Fatalf("datagram %d: result %d does not parse", i, cqe.Res)
		}
		want := c.payload
		if c.truncated {
			want = c.payload[:room]
		}
		if !bytes.Equal(payload, want) || int(out.Payloadlen) != len(want) {
			t.Errorf("datagram %d: payload %q (length %d), want %q", i, payload, out.Payloadlen, want)
		}
		if got := out.Flags&unix.MSG_TRUNC != 0; got != c.truncated {
			t.Errorf("datagram %d: MSG_TRUNC %v, want %v", i, got, c.truncated)
		}
		if len(name) != unix.SizeofSockaddrInet4 || binary.BigEndian.Uint16(name[2:]) != uint16(from.Port) {
			t.Errorf("datagram %d: name %x, want port %d", i, name, from.Port)
		}
		br.Recycle(buf(bid), bid)
		if rearm {
			arm()
		}
	}
	if _, _, _, _, ok := ParseRecvmsg(buf(0), SizeofRecvmsgOut, msg); ok {
		t.Error("a result shorter than the header and name room parsed")
	}
}
