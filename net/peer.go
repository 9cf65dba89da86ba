package net

import (
	"net"
	"net/netip"

	"github.com/veloq/veloq/internal/sock"
)

// peerAddr is a connection's peer address kept in the Conn itself: 20
// bytes of the Conn where a *net.TCPAddr took an interface (16 bytes of
// the Conn) and a 64-byte allocation per connection, a tenth of what an
// idle keep-alive connection held. RemoteAddr builds the net.Addr on
// demand; RemoteAddrPort needs no allocation.
type peerAddr struct {
	ip   [16]byte // an IPv4 address in the first 4 bytes
	port uint16
	kind peerKind
}

// peerKind says what a peerAddr holds.
type peerKind uint8

const (
	peerNone  peerKind = iota // no address
	peerIPv4                  // a TCP peer with a 4-byte net.IP
	peerIPv6                  // a TCP peer with a 16-byte net.IP, no zone
	peerOther                 // another address, in connAux.raddr
)

// setPeer records a as c's peer address. Call it before the connection
// is published to other goroutines, once: RemoteAddr reads the fields
// from any goroutine.
func (c *Conn) setPeer(a net.Addr) {
	t, ok := a.(*net.TCPAddr)
	switch {
	case a == nil:
		c.peer.kind = peerNone
	case ok && t.Zone == "" && len(t.IP) == net.IPv4len && uint(t.Port) <= 0xffff:
		copy(c.peer.ip[:], t.IP)
		c.peer.port, c.peer.kind = uint16(t.Port), peerIPv4
	case ok && t.Zone == "" && len(t.IP) == net.IPv6len && uint(t.Port) <= 0xffff:
		copy(c.peer.ip[:], t.IP)
		c.peer.port, c.peer.kind = uint16(t.Port), peerIPv6
	default:
		c.more().raddr = a
		c.peer.kind = peerOther
	}
}

// setPeerIP records ap as c's peer address, as setPeer does.
func (c *Conn) setPeerIP(ap netip.AddrPort) {
	a := ap.Addr()
	if a.Is4() {
		*(*[4]byte)(c.peer.ip[:]) = a.As4()
		c.peer.kind = peerIPv4
	} else {
		c.peer.ip = a.As16()
		c.peer.kind = peerIPv6
	}
	c.peer.port = ap.Port()
}

// tcpAddr returns the address as a new *net.TCPAddr. Only for peerIPv4
// and peerIPv6.
func (p *peerAddr) tcpAddr() *net.TCPAddr {
	if p.kind == peerIPv4 {
		return sock.NewTCPAddr(p.ip[:net.IPv4len], int(p.port))
	}
	return sock.NewTCPAddr(p.ip[:], int(p.port))
}

// addrPort returns the address as a netip.AddrPort (zero with none). Not
// for peerOther.
func (p *peerAddr) addrPort() netip.AddrPort {
	switch p.kind {
	case peerIPv4:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(p.ip[:4])), p.port)
	case peerIPv6:
		return netip.AddrPortFrom(netip.AddrFrom16(p.ip), p.port)
	}
	return netip.AddrPort{}
}
