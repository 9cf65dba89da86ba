//go:build linux

package uring

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// A Waker lets any goroutine interrupt a thread blocked in the ring's
// wait: it owns an eventfd whose 8-byte read is kept in flight on the
// ring, so Wake's write completes that read and the wait returns with its
// CQE. The ring's owner re-arms it after each such completion.
//
// The read's buffer is a heap slice the Waker references for its whole
// life, so the kernel never writes to memory the Go runtime could move or
// free (see "Memory rules").
type Waker struct {
	fd    int
	buf   []byte // the pending read writes here
	one   []byte // 1 as a little-endian uint64, written by Wake
	armed bool
}

// NewWaker creates the eventfd. Close it after the ring holds no read of
// it (after Disarmed reports true, or after the ring is closed).
func NewWaker() (*Waker, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("eventfd", err)
	}
	return &Waker{fd: fd, buf: make([]byte, 8), one: []byte{1, 0, 0, 0, 0, 0, 0, 0}}, nil
}

// PrepArm fills sqe with the eventfd read, tagged with userData. The
// owner calls it when Armed is false and the waker should be listening.
func (w *Waker) PrepArm(sqe *SQE, userData uint64) {
	sqe.PrepRead(w.fd, w.buf, 0)
	sqe.SetUserData(userData)
	w.armed = true
}

// Completed records the read's completion (its CQE was reaped).
func (w *Waker) Completed() { w.armed = false }

// Armed reports whether the read is in flight.
func (w *Waker) Armed() bool { return w.armed }

// Wake completes the pending read. Safe from any goroutine; a wake-up with
// nothing armed is kept by the eventfd and completes the next read at once.
func (w *Waker) Wake() error {
	_, err := unix.Write(w.fd, w.one)
	if err != nil && !errors.Is(err, unix.EAGAIN) {
		return os.NewSyscallError("write", err)
	}
	return nil
}

// Close closes the eventfd. Call it once, when no goroutine can still
// call Wake.
func (w *Waker) Close() error { return unix.Close(w.fd) }
