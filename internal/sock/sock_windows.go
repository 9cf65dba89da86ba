//go:build windows

package sock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// On Windows a socket is a handle that only Go's net package can drive
// (its runtime waits on IOCP) and net.FileConn is not implemented, so a
// socket made here could not be handed to net afterwards. Every socket is
// therefore made by net itself (net.Listen, net.Dial, net.ListenUDP) and
// owned by a table in this package; the engine keeps the table's int key
// where it keeps a descriptor on the other systems, and every call below
// takes that key. The calls that wait (Accept, Dial) block: only the
// portable backend's goroutines make them, never the loop. None of this
// has been run: it is built and vetted, not tested, on Windows.

// table holds the net values behind the handles. Keys start at 1 and are
// never reused while the process lives, so a stale key finds nothing
// instead of another connection.
var table struct {
	sync.Mutex
	m    map[int]any // net.Listener, net.Conn or net.PacketConn
	next int
}

// Put registers v (a net.Listener, net.Conn or net.PacketConn) and
// returns its handle.
func Put(v any) int {
	table.Lock()
	defer table.Unlock()
	if table.m == nil {
		table.m = make(map[int]any)
	}
	table.next++
	table.m[table.next] = v
	return table.next
}

// Get returns the value behind handle h, nil if there is none.
func Get(h int) any {
	table.Lock()
	defer table.Unlock()
	return table.m[h]
}

// errHandle is what a call on a handle that is not (or no longer) in the
// table returns, the counterpart of EBADF.
var errHandle = os.NewSyscallError("veloq handle", syscall.EINVAL)

// Close closes handle h's socket and forgets h. A socket net has closed
// already (the portable backend closes it to end a waiting Accept, Read
// or Write) is no error: closing the handle is what the engine means.
func Close(h int) error {
	table.Lock()
	v := table.m[h]
	delete(table.m, h)
	table.Unlock()
	c, ok := v.(interface{ Close() error })
	if !ok {
		return errHandle
	}
	if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Shutdown half-closes handle h's connection: its write side (wr), else
// its read side.
func Shutdown(h int, wr bool) error {
	type halfCloser interface {
		CloseWrite() error
		CloseRead() error
	}
	c, ok := Get(h).(halfCloser)
	if !ok {
		return errHandle
	}
	if wr {
		return c.CloseWrite()
	}
	return c.CloseRead()
}

// Addr is a resolved address. SA is what Connect dials, the same as Net
// (the other systems keep the kernel's sockaddr there).
type Addr struct {
	Family int
	SA     net.Addr
	Net    net.Addr
}

// Resolve turns network and address into a socket address (host names
// as resolveTCP says).
func Resolve(network, address string) (Addr, error) {
	switch network {
	case "unix": // AF_UNIX stream sockets exist since Windows 10 1803
		// afunix.h's sockaddr_un has a 108-byte path, as Linux's.
		if err := checkUnixPath(address, 108); err != nil {
			return Addr{}, err
		}
		ua := &net.UnixAddr{Name: address, Net: "unix"}
		return Addr{Family: syscall.AF_UNIX, SA: ua, Net: ua}, nil
	case "tcp", "tcp4", "tcp6":
	default:
		return Addr{}, fmt.Errorf("%w: %q", ErrNetwork, network)
	}
	ap, v4, err := resolveTCP(network, address)
	if err != nil {
		return Addr{}, err
	}
	ta := net.TCPAddrFromAddrPort(ap)
	return Addr{Family: family(v4), SA: ta, Net: ta}, nil
}

// ResolvePacket is Resolve for "udp", "udp4" and "udp6"; Windows has no
// Unix datagram sockets.
func ResolvePacket(network, address string) (Addr, error) {
	switch network {
	case "udp", "udp4", "udp6":
	default:
		return Addr{}, fmt.Errorf("%w: %q", ErrNetwork, network)
	}
	ap, v4, err := resolveTCP(strings.Replace(network, "udp", "tcp", 1), address)
	if err != nil {
		return Addr{}, err
	}
	ua := net.UDPAddrFromAddrPort(ap)
	return Addr{Family: family(v4), SA: ua, Net: ua}, nil
}

func family(v4 bool) int {
	if v4 {
		return syscall.AF_INET
	}
	return syscall.AF_INET6
}

// netName is the network name net.Listen and net.Dial take for a.
func netName(a Addr, udp bool) string {
	switch {
	case a.Family == syscall.AF_UNIX:
		return "unix"
	case udp && a.Family == syscall.AF_INET:
		return "udp4"
	case udp:
		return "udp"
	case a.Family == syscall.AF_INET:
		return "tcp4"
	}
	return "tcp"
}

// errReusePort: Windows has no SO_REUSEPORT. The engine asks for it there
// only for WithPortSharing (its loops share one socket: loop 0 accepts),
// which therefore fails instead of listening unshared.
var errReusePort = fmt.Errorf("veloq: port sharing (SO_REUSEPORT) is not available on Windows: %w", errors.ErrUnsupported)

// Listen makes a listening socket bound to a and returns its handle;
// net picks the backlog.
func Listen(a Addr, reusePort bool, _ int) (int, net.Addr, error) {
	if reusePort {
		return -1, nil, errReusePort
	}
	ln, err := net.Listen(netName(a, false), a.Net.String())
	if err != nil {
		return -1, nil, err
	}
	return Put(ln), ln.Addr(), nil
}

// ProbeBind: net.Listen on Windows does not share a taken port, so there
// is nothing to probe.
func ProbeBind(Addr) error { return nil }

// Accept waits for a connection on listener handle h and returns its
// handle and peer address. It blocks: only the portable backend's
// acceptor goroutine calls it.
func Accept(h int) (int, net.Addr, error) {
	ln, ok := Get(h).(net.Listener)
	if !ok {
		return -1, nil, errHandle
	}
	c, err := ln.Accept()
	if err != nil {
		return -1, nil, err
	}
	return Put(c), c.RemoteAddr(), nil
}

// pending holds a dialled connection's place in the table until its
// connect is done.
type pending struct {
	nagle bool // SetNoDelay(h, false) came before the connection
}

func (*pending) Close() error { return nil }

// Socket returns the handle of a connection yet to be dialled: the loop
// needs one when Dial returns, before the connect is done (Connect).
func Socket(int) (int, error) { return Put(&pending{}), nil }

// Connect dials to (a *net.TCPAddr or *net.UnixAddr) for handle h, made
// by Socket, and puts the connection behind h. It blocks: only the
// portable backend's connect goroutine calls it; cancelling ctx ends the
// dial. If h was closed meanwhile, the connection is closed and Connect
// fails.
func Connect(ctx context.Context, h int, to net.Addr) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, to.Network(), to.String())
	if err != nil {
		return nil, err
	}
	table.Lock()
	p, ok := table.m[h].(*pending)
	nagle := ok && p.nagle
	if ok {
		table.m[h] = c
	}
	table.Unlock()
	if !ok {
		c.Close()
		return nil, errHandle
	}
	if tc, isTCP := c.(*net.TCPConn); isTCP && nagle {
		_ = tc.SetNoDelay(false)
	}
	return c, nil
}

// LocalAddr returns the address handle h is bound to.
func LocalAddr(h int) (net.Addr, error) {
	switch v := Get(h).(type) {
	case net.Listener:
		return v.Addr(), nil
	case net.Conn:
		return v.LocalAddr(), nil
	case net.PacketConn:
		return v.LocalAddr(), nil
	}
	return nil, errHandle
}

// PeerAddr returns the address of handle h's peer.
func PeerAddr(h int) (net.Addr, error) {
	if c, ok := Get(h).(net.Conn); ok {
		return c.RemoteAddr(), nil
	}
	return nil, errHandle
}

// Connected reports whether h is a connection: net.Dial returns only
// connected ones.
func Connected(h int) bool {
	_, ok := Get(h).(net.Conn)
	return ok
}

// SoError: net.Dial reports a failed connect itself.
func SoError(int) error { return nil }

// Family returns the address family of handle h's socket.
func Family(h int) (int, error) {
	a, err := LocalAddr(h)
	if err != nil {
		return 0, err
	}
	switch a := a.(type) {
	case *net.TCPAddr:
		return family(a.IP.To4() != nil), nil
	case *net.UDPAddr:
		return family(a.IP.To4() != nil), nil
	case *net.UnixAddr:
		return syscall.AF_UNIX, nil
	}
	return 0, fmt.Errorf("%w: address %T", ErrNetwork, a)
}

// NoDelayByDefault: Go's net turns TCP_NODELAY on for every connection it
// makes, so Nagle's algorithm must be turned back on where asked for.
const NoDelayByDefault = true

// SetNoDelay sets TCP_NODELAY.
func SetNoDelay(h int, on bool) error {
	switch v := Get(h).(type) {
	case *net.TCPConn:
		return v.SetNoDelay(on)
	case *pending: // a dial under way: Connect sets it
		table.Lock()
		v.nagle = !on
		table.Unlock()
	}
	return nil // a Unix socket has no Nagle
}

// SetKeepAlive enables TCP keep-alive probes after idle d seconds (d <= 0
// disables), probing every d seconds as on the other systems.
func SetKeepAlive(h int, d int) error {
	c, ok := Get(h).(*net.TCPConn)
	if !ok {
		return nil
	}
	idle := time.Duration(d) * time.Second
	return c.SetKeepAliveConfig(net.KeepAliveConfig{Enable: d > 0, Idle: idle, Interval: idle})
}

// RawRead and RawWrite: the loop never waits on a Windows socket, so it
// has none of the non-blocking reads and writes the other systems make
// on the loop; they answer EAGAIN and the portable backend's goroutines
// do the blocking Read and Write.
func RawRead(int, []byte) (int, error) { return 0, syscall.EAGAIN }

// RawWrite: see RawRead.
func RawWrite(int, []byte) (int, error) { return 0, syscall.EAGAIN }

// ListenPacket makes a datagram socket bound to a, with its receive and
// send buffers raised to rcvBuf and sndBuf when those are positive, and
// returns its handle and bound address. reusePort fails, as in Listen.
func ListenPacket(a Addr, reusePort bool, rcvBuf, sndBuf int) (int, netip.AddrPort, error) {
	if reusePort {
		return -1, netip.AddrPort{}, errReusePort
	}
	c, err := net.ListenUDP(netName(a, true), a.Net.(*net.UDPAddr))
	if err != nil {
		return -1, netip.AddrPort{}, err
	}
	return packetDone(c, rcvBuf, sndBuf)
}

// DialPacket makes a datagram socket connected to a.
func DialPacket(a Addr, rcvBuf, sndBuf int) (int, netip.AddrPort, error) {
	c, err := net.DialUDP(netName(a, true), nil, a.Net.(*net.UDPAddr))
	if err != nil {
		return -1, netip.AddrPort{}, err
	}
	return packetDone(c, rcvBuf, sndBuf)
}

func packetDone(c *net.UDPConn, rcvBuf, sndBuf int) (int, netip.AddrPort, error) {
	if rcvBuf > 0 {
		_ = c.SetReadBuffer(rcvBuf) // best effort, as setsockopt is elsewhere
	}
	if sndBuf > 0 {
		_ = c.SetWriteBuffer(sndBuf)
	}
	return Put(c), c.LocalAddr().(*net.UDPAddr).AddrPort(), nil
}

// SockAddrPort returns handle h's local address (peer false) or its
// connected peer's (peer true).
func SockAddrPort(h int, peer bool) (netip.AddrPort, error) {
	c, ok := Get(h).(*net.UDPConn)
	if !ok {
		return netip.AddrPort{}, errHandle
	}
	a := c.LocalAddr()
	if peer {
		if a = c.RemoteAddr(); a == nil {
			return netip.AddrPort{}, os.NewSyscallError("getpeername", syscall.ENOTCONN)
		}
	}
	ap := a.(*net.UDPAddr).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}

// ProbeBindPacket: see ProbeBind.
func ProbeBindPacket(Addr) error { return nil }

// Drops: Windows reports no per-socket drop counter.
func Drops(int) (uint32, error) { return 0, ErrNoDropCounter }

// LingerZero sets SO_LINGER to zero on handle h's TCP connection, so that
// closing it resets the connection instead of ending it.
func LingerZero(h int) error {
	if c, ok := Get(h).(*net.TCPConn); ok {
		return c.SetLinger(0)
	}
	return nil
}
