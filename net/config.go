package net

import (
	"errors"
	"log/slog"
	stdnet "net"
	"time"

	"github.com/veloq/veloq/bufpool"
	"github.com/veloq/veloq/internal/sock"
)

// Backend names an I/O backend.
type Backend string

// The backends. BackendAuto uses io_uring when the kernel offers what veloq
// needs and epoll otherwise; outside Linux it uses BackendPortable. BackendPortable runs on Go's own net package
// (the runtime's poller) with goroutines doing the blocking reads, writes
// and accepts: it is for development and portability, not speed, and has
// no SpliceTo and no in-kernel SendFile (see ARCHITECTURE.md, "The
// portable backend").
const (
	BackendAuto     Backend = "auto"
	BackendUring    Backend = "uring"
	BackendEpoll    Backend = "epoll"
	BackendPortable Backend = "portable"
)

// ErrLinuxOnly is wrapped by the errors of what only Linux has: the
// io_uring and epoll backends asked for by name elsewhere (BackendAuto
// runs the portable backend there), and SpliceTo. The table in the
// package documentation lists what each platform lacks.
var ErrLinuxOnly = errors.New("veloq: only available on Linux")

// Available returns nil when b can run on this machine, or the reason it
// cannot: io_uring needs Linux 6.1 and a process that may use it (see
// ProbeUring); epoll needs Linux (elsewhere the error wraps ErrLinuxOnly);
// portable always runs, and auto runs whatever is available.
func (b Backend) Available() error {
	switch b {
	case BackendAuto, BackendPortable:
		return nil
	case BackendEpoll:
		return epollAvailable()
	case BackendUring:
		return ProbeUring()
	}
	_, err := ParseBackend(string(b))
	return err
}

// ParseBackend checks a backend name, as given on a command line.
func ParseBackend(s string) (Backend, error) {
	switch b := Backend(s); b {
	case BackendAuto, BackendUring, BackendEpoll, BackendPortable:
		return b, nil
	case "":
		return BackendAuto, nil
	}
	return "", errors.New(`veloq: backend must be "auto", "uring", "epoll" or "portable", not "` + s + `"`)
}

// Config is the engine's per-loop settings: NewLoop takes it, and a
// Server builds it from its options (WithLoopConfig sets the fields
// without an option of their own). The zero value of every field means its
// default; see the field comments.
type Config struct {
	// Backend is the I/O backend. Default BackendAuto.
	Backend Backend
	// CPU pins the loop's thread to this CPU when >= 0. Default -1: no pin.
	// (The zero value is CPU 0 only when PinCPU is true.)
	CPU    int
	PinCPU bool
	// Budget caps the completions dispatched per iteration, and the timers
	// run per iteration. Default 64.
	Budget int
	// Logger receives the loop's log lines. Default slog.Default().
	Logger *slog.Logger
	// ReadBufferCap bounds the input a handler may leave unconsumed on one
	// connection; past it the connection is closed with ErrInputTooLarge.
	// Default 4 MiB.
	ReadBufferCap int
	// WriteHighWater and WriteLowWater bound pending output per connection:
	// a write that takes it above high stops reading from the peer at once,
	// and reading resumes when it drains to low. Pending output therefore
	// stays near high: above it by at most what the handler writes for the
	// input it is processing. Defaults 64 KiB and 32 KiB (Netty's default
	// water marks; the kernel's socket buffer holds more on top).
	WriteHighWater, WriteLowWater int
	// CacheBytes caps the freed buffers the loop keeps for reuse; beyond it
	// they go to the shared pool and, unused, to the garbage collector.
	// Default 4 MiB.
	CacheBytes int
	// IdleTimeout closes a connection that has neither read nor written for
	// this long. Default 0: never.
	IdleTimeout time.Duration
	// CloseTimeout bounds how long Close waits for pending output to drain
	// before dropping it. Default 10s.
	CloseTimeout time.Duration
	// Nagle leaves Nagle's algorithm on for TCP connections. Default
	// (false): TCP_NODELAY is set, for a loop made with NewLoop as for a
	// Server, since a loop batches its writes into one send per connection
	// per iteration itself.
	Nagle bool
	// KeepAlive, when > 0, enables TCP keep-alive probes after that idle time.
	KeepAlive time.Duration
	// BlockThreshold is how long one callback (a handler's, or a posted,
	// timer or drain function) may run before it counts as blocking the
	// loop: it is counted in Stats.Blocked and logged, naming the handler
	// (its type, or what it says of itself as a Describer), at most once
	// per threshold. Default 100ms; negative: off.
	BlockThreshold time.Duration
	// BatchWait lets a loop that waits for events hold its wake-up back
	// by up to this long while more events are likely to follow, so that
	// one wake-up takes a batch. io_uring (Linux 6.12+; older kernels
	// wait as before) asks the kernel for one completion per input the
	// loop handled since its last wait, but for no more than a quarter of
	// the connections that sent input in the last millisecond (one or a
	// few connections get plain waits); the kernel returns when they are
	// there, or at BatchWait with whatever is, and a lone event that
	// arrives after BatchWait is handed over at once. epoll has no
	// minimum wait: with at least 32 connections sending input, a loop
	// that got fewer inputs than a quarter of them since its last wait
	// sleeps for BatchWait and then collects what arrived. Either way a
	// timer's lateness adds to the delay. On datagram sockets each
	// datagram is an input and each sender counts as a connection.
	// Default 20µs; negative: off.
	BatchWait time.Duration
	// RingEntries is the io_uring submission queue size. Default 1024.
	RingEntries uint32
	// RecvBuffers and RecvBufferSize shape the io_uring provided-buffer ring
	// (count must be a power of two). Defaults 256 and 16 KiB, or 17 KiB
	// for the loops of a WithTLS server, so that one buffer holds a whole
	// TLS record. The epoll backend reads into buffers of 64 KiB of its own
	// (epoll_lend.go).
	//
	// On Linux 6.12+ a second ring of RecvBuffers buffers of at most 16
	// KiB serves connections of small messages, whose receives share its
	// buffers (IOU_PBUF_RING_INC); see ARCHITECTURE.md.
	RecvBuffers, RecvBufferSize int
	// Pool is the shared buffer pool behind the loop's cache. Default: a
	// pool of the loop's own.
	Pool *bufpool.Pool

	// noIncRing leaves the io_uring receives whole buffers only, as on
	// kernels without IOU_PBUF_RING_INC (tests).
	noIncRing bool
}

func (c *Config) setDefaults() {
	if c.Backend == "" {
		c.Backend = BackendAuto
	}
	if !c.PinCPU {
		c.CPU = -1
	}
	if c.Budget <= 0 {
		c.Budget = 64
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ReadBufferCap <= 0 {
		c.ReadBufferCap = 4 << 20
	}
	if c.WriteHighWater <= 0 {
		c.WriteHighWater = 64 << 10
	}
	if c.WriteLowWater <= 0 || c.WriteLowWater > c.WriteHighWater {
		c.WriteLowWater = c.WriteHighWater / 2
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = 4 << 20
	}
	if c.BlockThreshold == 0 {
		c.BlockThreshold = 100 * time.Millisecond
	}
	if c.CloseTimeout <= 0 {
		c.CloseTimeout = 10 * time.Second
	}
	if c.BatchWait == 0 {
		c.BatchWait = 20 * time.Microsecond
	}
	if c.RingEntries == 0 {
		c.RingEntries = 1024
	}
	if c.RecvBuffers <= 0 {
		c.RecvBuffers = 256
	}
	if c.RecvBuffers&(c.RecvBuffers-1) != 0 {
		n := 1
		for n < c.RecvBuffers {
			n <<= 1
		}
		c.RecvBuffers = n
	}
	if c.RecvBufferSize <= 0 {
		c.RecvBufferSize = 16 << 10
	}
	if c.Pool == nil {
		c.Pool = bufpool.NewPool()
	}
}

// Errors reported to handlers (OnClose) and callers.
var (
	// ErrClosed: the connection or loop is closed or closing. It is the
	// standard library's net.ErrClosed, so errors.Is(err, net.ErrClosed)
	// holds with either package's name, as it does for a closed net.Conn.
	ErrClosed = stdnet.ErrClosed
	// ErrInputTooLarge: the handler left more than ReadBufferCap unconsumed.
	ErrInputTooLarge = errors.New("veloq: unconsumed input exceeds the read buffer cap")
	// ErrIdleTimeout: no traffic for Config.IdleTimeout.
	ErrIdleTimeout = errors.New("veloq: idle timeout")
	// ErrCloseTimeout: pending output did not drain within CloseTimeout.
	ErrCloseTimeout = errors.New("veloq: close timed out with output pending")
	// ErrDialTimeout: an outbound connect did not finish in time.
	ErrDialTimeout = errors.New("veloq: dial timed out")
	// ErrNotOnLoop: a Conn method that must run on the connection's loop
	// was called from another goroutine; it did nothing. Use
	// Conn.AsyncWrite, or Loop.Post a closure that makes the call.
	ErrNotOnLoop = errors.New("veloq: Conn method called off its loop (use AsyncWrite or Loop.Post)")
	// ErrHandlerPanic: a handler callback panicked; the panic was logged.
	ErrHandlerPanic = errors.New("veloq: handler panicked")
	// ErrUnsupportedNetwork: Listen or Dial was given a network other than
	// "tcp", "tcp4", "tcp6" or "unix" (UDP is not supported yet).
	ErrUnsupportedNetwork = sock.ErrNetwork
)
