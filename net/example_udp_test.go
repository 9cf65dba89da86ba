//go:build unix

package net_test

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	vnet "github.com/veloq/veloq/net"
)

// A UDP server answers each datagram from the loop; the answers of one
// loop iteration leave in one batch.
func ExampleListenPacket() {
	upper := vnet.PacketHandlerFunc(func(pc *vnet.PacketConn, p []byte, from netip.AddrPort) {
		// p and from are valid only during the call; WriteTo copies p.
		_ = pc.WriteTo([]byte(strings.ToUpper(string(p))), from)
	})
	pl, err := vnet.ListenPacket("udp", "127.0.0.1:0", upper, vnet.WithLoops(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pl.Close()

	c, err := net.Dial("udp", pl.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("hello"))
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	fmt.Println(string(buf[:n]))
	// Output: HELLO
}

// AsyncWriteTo sends from any goroutine: here the program pushes a
// datagram to a peer it learned about in the handler.
func ExamplePacketConn_AsyncWriteTo() {
	peers := make(chan netip.AddrPort, 1)
	pl, err := vnet.ListenPacket("udp", "127.0.0.1:0", vnet.PacketHandlerFunc(func(pc *vnet.PacketConn, p []byte, from netip.AddrPort) {
		select {
		case peers <- from:
		default:
		}
	}), vnet.WithLoops(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pl.Close()
	c, err := net.Dial("udp", pl.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("subscribe"))

	peer := <-peers
	pl.Conns()[0].AsyncWriteTo([]byte("update 1"), peer)
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	fmt.Println(string(buf[:n]))
	// Output: update 1
}

// A server can serve datagrams beside TCP, and dial connected datagram
// sockets (a DNS-style client): Write sends to the peer, and the handler
// sees only the peer's datagrams.
func ExampleServer_DialPacket() {
	srv, err := vnet.NewServer(&vnet.HandlerFuncs{}, vnet.WithLoops(1), vnet.WithMaxPacketQueue(64<<10))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	pl, err := srv.ListenPacket("udp", "127.0.0.1:0", vnet.PacketHandlerFunc(func(pc *vnet.PacketConn, p []byte, from netip.AddrPort) {
		_ = pc.WriteTo(append([]byte("re: "), p...), from)
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	answers := make(chan string, 1)
	client, err := srv.DialPacket("udp", pl.Addr().String(), vnet.PacketHandlerFunc(func(pc *vnet.PacketConn, p []byte, from netip.AddrPort) {
		answers <- string(p)
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	client.Loop().Post(func() { client.Write([]byte("query")) })
	select {
	case a := <-answers:
		fmt.Println(a)
	case <-time.After(5 * time.Second):
		fmt.Println("no answer")
	}
	// Output: re: query
}
