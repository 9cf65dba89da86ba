package net

import (
	"fmt"
	"log/slog"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/internal/sock"
)

// uringProbe caches the io_uring probe: the answer does not change while the
// process runs, and "auto" must log its fallback reason only once.
var uringProbe struct {
	once sync.Once
	err  error
}

// ProbeUring is part of the engine (a Server probes by itself): it
// reports whether this process can run the io_uring backend,
// and if not, why (the error names the cause: old kernel, seccomp, memlock).
func ProbeUring() error {
	uringProbe.once.Do(func() { uringProbe.err = probeUring() })
	return uringProbe.err
}

// newNativeBackend starts the backend l.cfg names, io_uring or epoll, or
// for auto io_uring if the probe allows it and epoll otherwise.
func newNativeBackend(l *Loop) (backend, Backend, error) {
	switch l.cfg.Backend {
	case BackendUring:
		b, err := newUringBackend(&l.cfg, l, l.log)
		if err != nil {
			return nil, "", fmt.Errorf("veloq: loop %d: io_uring backend: %w", l.id, err)
		}
		return b, BackendUring, nil
	case BackendEpoll:
		b, err := newEpollBackend(&l.cfg, l)
		if err != nil {
			return nil, "", fmt.Errorf("veloq: loop %d: epoll backend: %w", l.id, err)
		}
		return b, BackendEpoll, nil
	}
	if err := ProbeUring(); err == nil {
		if b, err := newUringBackend(&l.cfg, l, l.log); err == nil {
			return b, BackendUring, nil
		} else {
			l.log.Warn("veloq: io_uring setup failed; using epoll", "reason", err)
		}
	}
	b, err := newEpollBackend(&l.cfg, l)
	if err != nil {
		return nil, "", fmt.Errorf("veloq: loop %d: epoll backend: %w", l.id, err)
	}
	return b, BackendEpoll, nil
}

// autoBackend is what BackendAuto runs on: io_uring when the probe passes,
// epoll otherwise (logging why, once per Server).
func autoBackend(log *slog.Logger) Backend {
	if err := ProbeUring(); err != nil {
		log.Info("veloq: io_uring unavailable; using epoll", "reason", err.Error())
		return BackendEpoll
	}
	return BackendUring
}

// reusePortSpreads: Linux spreads a port's connections and datagrams over
// the SO_REUSEPORT sockets bound to it, by hash.
const reusePortSpreads = true

// epollAvailable: epoll always runs on Linux.
func epollAvailable() error { return nil }

// acceptBatch accepts (accept4) and reports up to maxAccepts connections
// waiting on listener idx. fd returns the listener's socket, or -1 once
// it stopped accepting, which a report may do (a handler closes the
// server). It returns whether it stopped at the limit with connections
// possibly left (the backend must come back without a new readiness edge)
// and whether the loop asked to back off after an error (the backend
// stops accepting until listen).
func acceptBatch(ev sink, idx uint32, fd func() int) (more, backOff bool) {
	for range maxAccepts {
		lfd := fd()
		if lfd < 0 {
			return false, false
		}
		c, peer, err := sock.AcceptPeer(lfd)
		if err != nil {
			if err == unix.EAGAIN {
				return false, false
			}
			if ev.acceptFailed(idx, os.NewSyscallError("accept4", err)) {
				return false, true
			}
			continue
		}
		ev.accepted(idx, c, peer)
	}
	return true, false
}
