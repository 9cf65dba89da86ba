package net

import (
	"fmt"
	"log/slog"
	"sync"
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

// epollAvailable: epoll always runs on Linux.
func epollAvailable() error { return nil }
