// Command udpload is a closed-loop UDP echo load generator with many
// source ports, batched with sendmmsg and recvmmsg.
//
// It opens -ports sockets, each connected to the server from its own
// port (a UDP server sees them as that many peers, and SO_REUSEPORT
// servers spread them by that), and keeps -window datagrams of -size
// bytes in flight on each: every echo that comes back is answered with a
// new datagram. One OS thread drives every socket through epoll, reading
// each ready socket with recvmmsg until it is empty and refilling its
// window with one sendmmsg, so the load costs a few system calls per
// batch rather than two per datagram.
//
// UDP loses datagrams under overload (a full socket buffer on either
// side): a socket whose echoes stop for -timeout counts what it has in
// flight as lost and starts a new window; an echo of an abandoned window
// arriving late is counted as late, not received. Each echo is checked:
// its length, and the socket and window it was sent in.
//
// The run is bounded: -warmup, then the measured window of -duration.
// Only loopback addresses are accepted.
//
//	udpload -addr 127.0.0.1:9000 -ports 64 -window 8 -size 64 -duration 10s
//	udpload -addr 127.0.0.1:9000 -json -server-pid 1234   # + server CPU over the window
package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/bench/internal/loopback"
	"github.com/veloq/veloq/bench/internal/proc"
)

type config struct {
	addr      string
	ports     int
	window    int
	size      int
	duration  time.Duration
	warmup    time.Duration
	timeout   time.Duration
	serverPID int
	json      bool
}

// Result is what -json prints: the figures over the measured window.
type Result struct {
	Tool    string  `json:"tool"`
	Addr    string  `json:"addr"`
	Ports   int     `json:"ports"`
	Window  int     `json:"window"` // datagrams in flight per port
	Size    int     `json:"size"`
	WarmupS float64 `json:"warmup_s"`
	WindowS float64 `json:"window_s"`

	Sent     int64   `json:"sent"`     // datagrams sent in the window
	Received int64   `json:"received"` // echoes received in the window
	Lost     int64   `json:"lost"`     // datagrams given up for lost in the window
	Late     int64   `json:"late"`     // echoes of abandoned windows
	Loss     float64 `json:"loss"`     // Lost / (Received + Lost)
	RPS      float64 `json:"rps"`      // echoes per second
	Errors   int64   `json:"errors"`   // send/receive errors and bad echoes, whole run
	// FirstError is the first error seen, for the report.
	FirstError string `json:"first_error,omitempty"`

	ServerPID        int     `json:"server_pid,omitempty"`
	ServerCPUS       float64 `json:"server_cpu_s"`
	ServerSysS       float64 `json:"server_sys_s"` // of ServerCPUS, the kernel's (stime)
	ServerCPUUtil    float64 `json:"server_cpu_util"`
	ReqPerServerCPUS float64 `json:"req_per_server_cpu_s"` // echoes per server CPU-second
	ClientCPUS       float64 `json:"client_cpu_s"`
	ClientCPUUtil    float64 `json:"client_cpu_util"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "udpload:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var c config
	fs := flag.NewFlagSet("udpload", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:9000", "server address (loopback only: 127.0.0.0/8, ::1 or localhost)")
	fs.IntVar(&c.ports, "ports", 64, "source sockets (ports), each a separate peer to the server")
	fs.IntVar(&c.window, "window", 8, "datagrams in flight per port")
	fs.IntVar(&c.size, "size", 64, "datagram size in bytes (at least 8)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured window")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "load before the window, not measured")
	fs.DurationVar(&c.timeout, "timeout", 200*time.Millisecond, "a port whose echoes stop for this long counts its datagrams in flight as lost")
	fs.IntVar(&c.serverPID, "server-pid", 0, "if set, sample this process's CPU time (/proc) at the window's edges")
	fs.BoolVar(&c.json, "json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case c.ports < 1 || c.ports > 60000:
		return errors.New("-ports must be 1..60000")
	case c.window < 1 || c.window > 1024:
		return errors.New("-window must be 1..1024")
	case c.size < 8 || c.size > 65507:
		return errors.New("-size must be 8..65507")
	case c.duration <= 0 || c.warmup < 0 || c.timeout <= 0:
		return errors.New("-duration and -timeout must be positive, -warmup not negative")
	}
	addr, err := loopback.Addr(c.addr)
	if err != nil {
		return err
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		if ua, rerr := net.ResolveUDPAddr("udp", addr); rerr == nil {
			ap = ua.AddrPort()
		} else {
			return fmt.Errorf("-addr: %w", err)
		}
	}
	if err := proc.RaiseNofile(uint64(c.ports) + 64); err != nil {
		return err
	}
	g, err := newGen(c, ap)
	if err != nil {
		return err
	}
	defer g.close()
	res := g.run()
	res.Addr = addr
	if c.json {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	fmt.Printf("udpload: %d ports x %d in flight, %d B: %.0f echoes/s, loss %.4f%% (%d lost, %d late), %d errors",
		c.ports, c.window, c.size, res.RPS, res.Loss*100, res.Lost, res.Late, res.Errors)
	if c.serverPID > 0 {
		fmt.Printf(", server CPU %.0f%%, %.0f echoes per server CPU-s", res.ServerCPUUtil*100, res.ReqPerServerCPUS)
	}
	fmt.Println()
	if res.FirstError != "" {
		fmt.Println("udpload: first error:", res.FirstError)
	}
	return nil
}

// port is one source socket.
type port struct {
	fd       int
	inflight int
	epoch    uint32    // the window in flight; bumped when it is given up
	last     time.Time // last progress (an echo, or a new window)
}

// gen is the generator: every port, its batches and the counters.
type gen struct {
	c     config
	epfd  int
	ports []port
	// Batches of up to window messages, built once: payloads carry the
	// port's index and epoch in their first 8 bytes.
	tx, rx         []unix.Mmsghdr
	txIov, rxIov   []unix.Iovec
	txBuf, rxBuf   []byte
	sent, received int64
	lost, late     int64
	errs           int64
	firstErr       string
}

func newGen(c config, to netip.AddrPort) (*gen, error) {
	g := &gen{c: c, epfd: -1}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	g.epfd = epfd
	family, sa := unix.AF_INET, unix.Sockaddr(&unix.SockaddrInet4{Port: int(to.Port()), Addr: to.Addr().Unmap().As4()})
	if !to.Addr().Unmap().Is4() {
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: int(to.Port()), Addr: to.Addr().As16()}
	}
	for i := 0; i < c.ports; i++ {
		fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			g.close()
			return nil, fmt.Errorf("socket: %w", err)
		}
		g.ports = append(g.ports, port{fd: fd})
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
		if err := unix.Connect(fd, sa); err != nil {
			g.close()
			return nil, fmt.Errorf("connect: %w", err)
		}
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(i)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			g.close()
			return nil, fmt.Errorf("epoll_ctl: %w", err)
		}
	}
	w, n := c.window, c.size
	g.tx, g.rx = make([]unix.Mmsghdr, w), make([]unix.Mmsghdr, w)
	g.txIov, g.rxIov = make([]unix.Iovec, w), make([]unix.Iovec, w)
	g.txBuf, g.rxBuf = make([]byte, w*n), make([]byte, w*(n+1)) // +1: a longer echo shows as one
	for i := 0; i < w; i++ {
		for j := 8; j < n; j++ {
			g.txBuf[i*n+j] = byte(i + j)
		}
		g.txIov[i].Base = &g.txBuf[i*n]
		g.txIov[i].SetLen(n)
		g.tx[i].Hdr.Iov, g.tx[i].Hdr.Iovlen = &g.txIov[i], 1
		g.rxIov[i].Base = &g.rxBuf[i*(n+1)]
		g.rxIov[i].SetLen(n + 1)
		g.rx[i].Hdr.Iov, g.rx[i].Hdr.Iovlen = &g.rxIov[i], 1
	}
	return g, nil
}

func (g *gen) close() {
	for _, p := range g.ports {
		unix.Close(p.fd)
	}
	if g.epfd >= 0 {
		unix.Close(g.epfd)
	}
}

func (g *gen) fail(err error) {
	g.errs++
	if g.firstErr == "" {
		g.firstErr = err.Error()
	}
}

// mmsg is recvmmsg or sendmmsg, non-blocking; x/sys/unix wraps neither.
// The headers and the memory they point to are heap slices of gen, which
// outlive the call and do not move.
func mmsg(trap uintptr, fd int, h []unix.Mmsghdr) (int, error) {
	n, _, e := unix.Syscall6(trap, uintptr(fd), uintptr(unsafePointer(h)), uintptr(len(h)), unix.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// refill sends port i datagrams until its window is full.
func (g *gen) refill(i int, now time.Time) {
	p := &g.ports[i]
	k := g.c.window - p.inflight
	if k <= 0 {
		return
	}
	if p.inflight == 0 {
		p.last = now
	}
	n := g.c.size
	for j := 0; j < k; j++ {
		binary.LittleEndian.PutUint32(g.txBuf[j*n:], uint32(i))
		binary.LittleEndian.PutUint32(g.txBuf[j*n+4:], p.epoch)
	}
	for k > 0 {
		sent, err := mmsg(unix.SYS_SENDMMSG, p.fd, g.tx[:k])
		if err != nil {
			if err != unix.EAGAIN && err != unix.ENOBUFS && err != unix.ECONNREFUSED {
				g.fail(fmt.Errorf("sendmmsg: %w", err))
			}
			return // the timeout gives the window up if nothing comes back
		}
		p.inflight += sent
		g.sent += int64(sent)
		k -= sent
	}
}

// drain reads port i until it is empty.
func (g *gen) drain(i int, now time.Time) {
	p := &g.ports[i]
	for {
		got, err := mmsg(unix.SYS_RECVMMSG, p.fd, g.rx)
		if err == unix.EAGAIN {
			return
		}
		if err != nil {
			g.fail(fmt.Errorf("recvmmsg: %w", err))
			return
		}
		n := g.c.size
		for j := 0; j < got; j++ {
			b := g.rxBuf[j*(n+1):]
			switch {
			case int(g.rx[j].Len) != n:
				g.fail(fmt.Errorf("echo of %d bytes, want %d", g.rx[j].Len, n))
			case binary.LittleEndian.Uint32(b) != uint32(i):
				g.fail(fmt.Errorf("port %d got the echo of port %d", i, binary.LittleEndian.Uint32(b)))
			case binary.LittleEndian.Uint32(b[4:]) != p.epoch || p.inflight == 0:
				g.late++
			default:
				p.inflight--
				g.received++
				p.last = now
			}
		}
		if got < len(g.rx) {
			return
		}
	}
}

func (g *gen) run() Result {
	runtime.LockOSThread() // one thread does the whole load
	defer runtime.UnlockOSThread()
	c := g.c
	res := Result{Tool: "udpload", Ports: c.ports, Window: c.window, Size: c.size,
		WarmupS: c.warmup.Seconds(), ServerPID: c.serverPID}
	start := time.Now()
	for i := range g.ports {
		g.refill(i, start)
	}
	events := make([]unix.EpollEvent, 256)
	warmEnd, end := start.Add(c.warmup), start.Add(c.warmup+c.duration)
	measuring := false
	var s0, s1 struct{ sent, received, lost, late int64 }
	var srv0, cli0 proc.Sample
	var t0 time.Time
	lastScan := start
	for {
		now := time.Now()
		if !measuring && !now.Before(warmEnd) {
			measuring, t0 = true, now
			s0.sent, s0.received, s0.lost, s0.late = g.sent, g.received, g.lost, g.late
			if c.serverPID > 0 {
				srv0, _ = proc.Take(c.serverPID)
			}
			cli0, _ = proc.Take(os.Getpid())
		}
		if !now.Before(end) {
			s1.sent, s1.received, s1.lost, s1.late = g.sent, g.received, g.lost, g.late
			res.WindowS = now.Sub(t0).Seconds()
			if c.serverPID > 0 {
				if srv1, err := proc.Take(c.serverPID); err == nil {
					res.ServerCPUS = proc.CPUBetween(srv0, srv1)
					res.ServerSysS = proc.SysBetween(srv0, srv1)
				} else {
					g.fail(fmt.Errorf("server CPU: %w", err))
				}
			}
			if cli1, err := proc.Take(os.Getpid()); err == nil {
				res.ClientCPUS = proc.CPUBetween(cli0, cli1)
			}
			break
		}
		n, err := unix.EpollWait(g.epfd, events, 10)
		if err != nil && err != unix.EINTR {
			g.fail(fmt.Errorf("epoll_wait: %w", err))
			break
		}
		now = time.Now()
		for _, ev := range events[:max(n, 0)] {
			i := int(ev.Fd)
			g.drain(i, now)
			g.refill(i, now)
		}
		if now.Sub(lastScan) >= c.timeout/4 {
			lastScan = now
			for i := range g.ports {
				p := &g.ports[i]
				if p.inflight > 0 && now.Sub(p.last) >= c.timeout {
					g.lost += int64(p.inflight)
					p.inflight = 0
					p.epoch++
					g.refill(i, now)
				}
			}
		}
	}
	res.Sent, res.Received = s1.sent-s0.sent, s1.received-s0.received
	res.Lost, res.Late = s1.lost-s0.lost, s1.late-s0.late
	if t := res.Received + res.Lost; t > 0 {
		res.Loss = float64(res.Lost) / float64(t)
	}
	if res.WindowS > 0 {
		res.RPS = float64(res.Received) / res.WindowS
		res.ServerCPUUtil = res.ServerCPUS / res.WindowS
		res.ClientCPUUtil = res.ClientCPUS / res.WindowS
	}
	if res.ServerCPUS > 0 {
		res.ReqPerServerCPUS = float64(res.Received) / res.ServerCPUS
	}
	res.Errors, res.FirstError = g.errs, g.firstErr
	return res
}
