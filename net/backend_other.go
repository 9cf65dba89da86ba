//go:build !linux

package net

import (
	"fmt"
	"log/slog"
)

// Outside Linux there is neither io_uring nor epoll: auto runs the
// portable backend, and asking for either of the others by name is an
// error that wraps ErrLinuxOnly.

// ProbeUring reports that io_uring is Linux only.
func ProbeUring() error { return fmt.Errorf("%w: io_uring", ErrLinuxOnly) }

func newNativeBackend(l *Loop) (backend, Backend, error) {
	if b := l.cfg.Backend; b == BackendUring || b == BackendEpoll {
		return nil, "", fmt.Errorf("%w: loop %d: the %s backend (auto runs the portable one here)", ErrLinuxOnly, l.id, b)
	}
	b, err := newPortableBackend(&l.cfg, l)
	if err != nil {
		return nil, "", fmt.Errorf("veloq: loop %d: portable backend: %w", l.id, err)
	}
	return b, BackendPortable, nil
}

// reusePortSpreads: macOS and the BSDs let several sockets bind a port
// with SO_REUSEPORT but give its connections to one of them (FreeBSD
// balances only with SO_REUSEPORT_LB), so BalanceReusePort there falls
// back to one acceptor that hands connections to the least loaded loop,
// and a datagram port is one socket on loop 0.
const reusePortSpreads = false

// autoBackend is what BackendAuto runs on: the portable backend.
func autoBackend(*slog.Logger) Backend { return BackendPortable }

func epollAvailable() error { return fmt.Errorf("%w: epoll", ErrLinuxOnly) }
