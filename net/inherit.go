package net

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"

	"github.com/veloq/veloq/internal/sock"
)

// Errors for a descriptor that cannot be served: ListenFiles and
// ListenPacketFiles wrap them with the descriptor's name and number.
var (
	// ErrNotSocket: the descriptor is not a socket (a regular file, a pipe).
	ErrNotSocket = errors.New("veloq: descriptor is not a socket")
	// ErrSocketType: a socket of the wrong type or family, such as a UDP
	// socket handed to ListenFiles or a TCP one to ListenPacketFiles.
	ErrSocketType = errors.New("veloq: socket of the wrong type")
	// ErrNotListening: a stream socket on which listen(2) was not called.
	ErrNotListening = errors.New("veloq: stream socket is not listening")
)

// ListenFiles serves listening stream sockets (TCP or Unix) the process
// inherited, from its parent, systemd (see ActivationFiles) or an
// upgrade, as Listen serves the ones it binds, and returns the address
// of the first. Like net.FileListener it works on duplicates: the caller
// still closes the files, and the server never removes a Unix socket's
// file, which is the caller's.
//
// How the sockets are shared out among the loops: with as many sockets
// as loops or more (an old veloq process hands over one SO_REUSEPORT
// socket per loop), socket i goes to loop i mod loops and each loop
// serves what it accepts, as after Listen; with fewer (systemd hands one
// socket per address), loop i accepts on socket i and hands each
// connection to the least loaded loop (or round robin with
// BalanceRoundRobin), as Listen does without SO_REUSEPORT. Each socket is
// accepted on by one loop, so no connection waits in a queue nobody
// reads.
//
// Every file is checked first: one that is not a socket fails with
// ErrNotSocket, a datagram socket or another family with ErrSocketType, a
// stream socket that is not listening with ErrNotListening, and nothing
// is served.
func (s *Server) ListenFiles(files ...*os.File) (net.Addr, error) {
	if len(files) == 0 {
		return nil, errors.New("veloq: ListenFiles: no file")
	}
	fds, networks, err := dupSockets(files, syscall.SOCK_STREAM)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		closeFds(fds)
		return nil, ErrServerClosed
	}
	perLoop := len(fds) >= len(s.loops)
	var added []*Listener
	for i, fd := range fds {
		var dispatch func() *Loop
		if !perLoop {
			dispatch = s.pick
		}
		ln, err := s.loops[i%len(s.loops)].addListener(fd, networks[i], s.h, dispatch, "")
		if err != nil {
			closeFds(fds[i:])
			for _, ln := range added {
				ln.Close()
			}
			return nil, fmt.Errorf("veloq: listen on %s: %w", files[i].Name(), err)
		}
		added = append(added, ln)
	}
	s.listeners = append(s.listeners, added...)
	s.addrs = append(s.addrs, added[0].Addr())
	return added[0].Addr(), nil
}

// ListenPacketFiles serves inherited datagram sockets (UDP or unixgram)
// with h, as ListenPacket serves the ones it binds: socket i is read by
// loop i mod loops (datagrams cannot be handed between loops, so one
// socket is served by one loop; an old veloq process hands over one
// SO_REUSEPORT socket per loop). The files are duplicated, as for
// ListenFiles, and checked the same way (ErrNotSocket, ErrSocketType).
func (s *Server) ListenPacketFiles(h PacketHandler, files ...*os.File) (*PacketListener, error) {
	if h == nil {
		return nil, errors.New("veloq: nil packet handler")
	}
	if len(files) == 0 {
		return nil, errors.New("veloq: ListenPacketFiles: no file")
	}
	fds, _, err := dupSockets(files, syscall.SOCK_DGRAM)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		closeFds(fds)
		return nil, ErrServerClosed
	}
	pl := &PacketListener{srv: s}
	for i, fd := range fds {
		family, _ := sock.Family(fd)
		var local netip.AddrPort
		if family != syscall.AF_UNIX {
			if local, err = sock.SockAddrPort(fd, false); err != nil {
				closeFds(fds[i:])
				break
			}
		}
		if i == 0 {
			pl.addr = local
		}
		var pc *PacketConn
		if pc, err = s.startPacket(s.loops[i%len(s.loops)], fd, family, local, netip.AddrPort{}, false, h); err != nil {
			closeFds(fds[i+1:]) // startPacket closed fd
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

// dupSockets checks that every file is a socket of type typ (and, for a
// stream, listening) in a family veloq serves, and returns non-blocking
// close-on-exec duplicates with their network names. On error nothing is
// left open.
func dupSockets(files []*os.File, typ int) (fds []int, networks []string, err error) {
	for _, f := range files {
		var network string
		network, err = checkSocket(f, typ)
		if err != nil {
			break
		}
		var fd int
		if fd, err = dupFd(f); err != nil {
			break
		}
		fds = append(fds, fd)
		networks = append(networks, network)
	}
	if err != nil {
		closeFds(fds)
		return nil, nil, err
	}
	return fds, networks, nil
}

func closeFds(fds []int) {
	for _, fd := range fds {
		closeFD(fd)
	}
}

// ListenerFiles returns duplicates of the listening stream sockets that
// serve addr (one per loop after Listen with SO_REUSEPORT), to hand to
// another process, which serves them with ListenFiles; nil addr: every
// listening socket. The file names are "network:address".
//
// The sockets are shared, not copied: a connection waiting in an accept
// queue is taken by whichever process accepts first, and a socket stays
// open until every process has closed it. A Unix socket's file handed
// over this way is no longer removed when this server closes its socket:
// the other process serves it now.
func (s *Server) ListenerFiles(addr net.Addr) ([]*os.File, error) {
	s.mu.Lock()
	lns := append([]*Listener(nil), s.listeners...)
	s.mu.Unlock()
	var files []*os.File
	for _, h := range lns {
		if addr != nil && (h.Addr().Network() != addr.Network() || h.Addr().String() != addr.String()) {
			continue
		}
		f, err := h.file()
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, err
		}
		if f != nil {
			files = append(files, f)
		}
	}
	return files, nil
}

// file duplicates the listener's socket on its loop, which owns the
// descriptor (it is closed there), so that the number duplicated is
// still this socket's. A closed listener gives nil.
func (h *Listener) file() (*os.File, error) {
	ln := h.ln
	return dupOnLoop(h.loop, func() (int, bool) {
		if ln.closing {
			return -1, false
		}
		ln.unlink = "" // the file is the other process's now
		return ln.fd, true
	}, fileName(ln.network, ln.addr.String()))
}

// dupOnLoop runs sock on loop l and duplicates the descriptor it gives
// there, as an *os.File called name; nil when sock reports the socket
// closed or the loop has stopped.
func dupOnLoop(l *Loop, sock func() (fd int, ok bool), name string) (*os.File, error) {
	if err := fdPassing(); err != nil {
		return nil, err // before sock, which hands the socket over
	}
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	if err := l.Post(func() {
		fd, ok := sock()
		if !ok {
			ch <- result{-1, nil}
			return
		}
		dup, err := dupRaw(fd)
		ch <- result{dup, err}
	}); err != nil {
		return nil, nil // the loop stopped: the socket is closed
	}
	r := <-ch
	if r.err != nil || r.fd < 0 {
		return nil, r.err
	}
	return os.NewFile(uintptr(r.fd), name), nil
}

// Files returns duplicates of the listener's sockets, one per loop that
// serves it, for another process to serve with ListenPacketFiles (see
// Server.ListenerFiles). A unixgram socket's file is no longer removed
// by Close once handed over.
func (pl *PacketListener) Files() ([]*os.File, error) {
	var files []*os.File
	for _, pc := range pl.conns {
		f, err := pc.file()
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, err
		}
		if f != nil {
			files = append(files, f)
		}
	}
	pl.unlink = ""
	return files, nil
}

// file duplicates the socket on its loop (see Listener.file).
func (pc *PacketConn) file() (*os.File, error) {
	network := "udp"
	if pc.family == syscall.AF_UNIX {
		network = "unixgram"
	}
	return dupOnLoop(pc.loop, func() (int, bool) { return pc.fd, !pc.closing }, fileName(network, pc.local.String()))
}

func fileName(network, addr string) string {
	return network + ":" + strings.TrimSpace(addr)
}
