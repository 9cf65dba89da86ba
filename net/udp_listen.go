package net

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/veloq/veloq/internal/sock"
)

// PacketListener is a datagram address a server serves: one socket per
// loop with SO_REUSEPORT (the kernel spreads peers over them by a hash of
// the addresses, so one peer's datagrams stay on one loop), or one socket
// on the first loop with another Balance.
type PacketListener struct {
	srv    *Server
	owned  bool // created by the package-level ListenPacket: Close closes srv
	addr   netip.AddrPort
	conns  []*PacketConn
	unlink string // the unixgram socket file this listener bound, removed by Close
}

// ListenPacket starts a server for h on a datagram network ("udp",
// "udp4", "udp6" or "unixgram") and address, with one socket per loop by
// default (one in all for unixgram), and returns once every socket is
// registered. Options configure the loops as
// for Listen and the sockets with WithPacketBuffer, WithPacketBatch,
// WithMaxPacketQueue, WithUDPOffload and WithPacketSocketBuffers. Closing
// the listener stops the server.
func ListenPacket(network, address string, h PacketHandler, opts ...Option) (*PacketListener, error) {
	s, err := NewServer(packetOnly{}, opts...)
	if err != nil {
		return nil, err
	}
	pl, err := s.ListenPacket(network, address, h)
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	pl.owned = true
	return pl, nil
}

// isPacketNetwork reports whether network names datagrams, which Listen
// refuses with a pointer to ListenPacket.
func isPacketNetwork(network string) bool {
	switch network {
	case "udp", "udp4", "udp6", "unixgram":
		return true
	}
	return false
}

// packetOnly is the stream handler of a server that serves only
// datagrams: it never listens for connections.
type packetOnly struct{}

func (packetOnly) OnOpen(c *Conn)             { _ = c.Close() }
func (packetOnly) OnData(*Conn)               {}
func (packetOnly) OnClose(c *Conn, err error) {}

// ListenPacket serves h on a datagram network ("udp", "udp4" or "udp6")
// and address: with BalanceReusePort (the default) on Linux every loop
// gets its own socket on the port, otherwise loop 0 has the only one. On "unixgram"
// (a path, or "@name" for an abstract one) loop 0 has the only socket;
// OnPacket's from is then the zero AddrPort, and Reply answers a sender.
// The socket file is removed when the listener is closed. It returns once
// the sockets are registered; their handlers may run before it returns.
func (s *Server) ListenPacket(network, address string, h PacketHandler) (*PacketListener, error) {
	a, err := s.packetAddr("listen", network, address, h)
	if err != nil {
		return nil, err
	}
	perLoop := s.opts.balance == BalanceReusePort && reusePortSpreads && len(s.loops) > 1 && a.Family != syscall.AF_UNIX
	if perLoop && !s.opts.sharePort {
		// As for TCP: do not silently share a port another socket holds.
		if err := sock.ProbeBindPacket(a); err != nil {
			return nil, fmt.Errorf("veloq: listen %s %s: %w", network, address, err)
		}
	}
	pl := &PacketListener{srv: s}
	if a.Family == syscall.AF_UNIX && address != "" && address[0] != '@' {
		pl.unlink = address
	}
	for i, l := range s.loops {
		if i > 0 && !perLoop {
			break
		}
		if i == 1 {
			// The others bind the port the first one got (port 0).
			if a, err = sock.ResolvePacket(network, pl.addr.String()); err != nil {
				break
			}
		}
		var fd int
		var local netip.AddrPort
		fd, local, err = sock.ListenPacket(a, perLoop || s.opts.sharePort, s.opts.pkt.rcvBuf, s.opts.pkt.sndBuf)
		if err != nil {
			pl.unlink = "" // not ours: bind failed
			err = fmt.Errorf("veloq: listen %s %s: %w", network, address, err)
			break
		}
		if i == 0 {
			pl.addr = local
		}
		var pc *PacketConn
		if pc, err = s.startPacket(l, fd, a.Family, local, netip.AddrPort{}, false, h); err != nil {
			break
		}
		pl.conns = append(pl.conns, pc)
	}
	if err != nil {
		pl.closeConns()
		return nil, err
	}
	return pl, nil
}

// DialPacket opens a datagram socket connected to address ("udp", "udp4",
// "udp6" or "unixgram") on the loop with the fewest connections and
// serves it with h (a unixgram socket is bound to an abstract name the
// kernel picks, so that the peer can answer).
// A connected socket receives only from its peer, sends to it with Write,
// and learns of ICMP errors: a peer with no socket on the port makes the
// kernel report ECONNREFUSED, which is counted (PacketStats.Refused) and
// does not close it. Close it with Close.
// It takes no context, unlike Dial: connecting a datagram socket only
// records its peer in the kernel, so nothing waits on the network; it
// resolves names as ListenPacket does.
func (s *Server) DialPacket(network, address string, h PacketHandler) (*PacketConn, error) {
	a, err := s.packetAddr("dial", network, address, h)
	if err != nil {
		return nil, err
	}
	fd, local, err := sock.DialPacket(a, s.opts.pkt.rcvBuf, s.opts.pkt.sndBuf)
	if err != nil {
		return nil, fmt.Errorf("veloq: dial %s %s: %w", network, address, err)
	}
	var peer netip.AddrPort
	if a.Family != syscall.AF_UNIX {
		if peer, err = sock.SockAddrPort(fd, true); err != nil {
			closeFD(fd)
			return nil, fmt.Errorf("veloq: dial %s %s: %w", network, address, err)
		}
	}
	return s.startPacket(s.leastLoaded(), fd, a.Family, local, peer, true, h)
}

// startPacket hands fd to loop l as a PacketConn and waits until it is
// registered. fd is closed on failure.
func (s *Server) startPacket(l *Loop, fd, family int, local, peer netip.AddrPort, connected bool, h PacketHandler) (*PacketConn, error) {
	cfg := s.opts.pkt
	pc := &PacketConn{
		loop: l, h: h, fd: fd, family: family, local: local, peer: peer, conn: connected,
		cfg: &cfg, done: make(chan struct{}),
	}
	pc.kdrops.fd = fd
	// A coalesced receive can be up to 64 KiB: GRO needs buffers that hold
	// one, or it would truncate whole runs of datagrams.
	pc.gso, pc.gro = kernelOffloads(fd, cfg.gro && cfg.bufSize >= 64<<10)
	pc.gso0 = pc.gso
	errc := make(chan error, 1)
	if err := l.Post(func() { errc <- l.addPacket(pc) }); err != nil {
		closeFD(fd)
		return nil, err
	}
	if err := <-errc; err != nil {
		closeFD(fd)
		return nil, err
	}
	return pc, nil
}

// Addr returns the bound address (the port the kernel chose for port 0);
// the zero AddrPort for unixgram.
func (pl *PacketListener) Addr() netip.AddrPort { return pl.addr }

// Conns returns the listener's sockets, one per loop that serves it.
func (pl *PacketListener) Conns() []*PacketConn { return pl.conns }

// Server returns the server the listener belongs to.
func (pl *PacketListener) Server() *Server { return pl.srv }

// Stats returns the sum of the sockets' counters.
func (pl *PacketListener) Stats() PacketStats {
	var t PacketStats
	for _, pc := range pl.conns {
		t = t.Add(pc.Stats())
	}
	return t
}

// Close closes the listener's sockets and waits until they are released;
// for a listener made by the package-level ListenPacket it then stops the
// server too.
func (pl *PacketListener) Close() error {
	pl.closeConns()
	if pl.owned {
		return pl.srv.Close()
	}
	return nil
}

func (pl *PacketListener) closeConns() {
	for _, pc := range pl.conns {
		_ = pc.Close() // ErrClosed: its loop stopped and closed it
	}
	for _, pc := range pl.conns {
		select {
		case <-pc.done:
		case <-pc.loop.Done():
		}
	}
	if pl.unlink != "" {
		_ = syscall.Unlink(pl.unlink)
		pl.unlink = ""
	}
}

// packetAddr checks what ListenPacket and DialPacket (op) are given and
// resolves the address.
func (s *Server) packetAddr(op, network, address string, h PacketHandler) (sock.Addr, error) {
	if h == nil {
		return sock.Addr{}, errors.New("veloq: nil packet handler")
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return sock.Addr{}, ErrServerClosed
	}
	a, err := sock.ResolvePacket(network, address)
	if err != nil {
		return sock.Addr{}, fmt.Errorf("veloq: %s %s %s: %w", op, network, address, err)
	}
	return a, nil
}
