//go:build linux

// Linux only: io_uring is a Linux interface.

package uring_test

import (
	"fmt"
	"runtime"
	"time"

	"github.com/veloq/veloq/uring"
)

// A NOP round trip: get an SQE, prepare it, submit and wait, read the CQE
// in place, give its slot back.
func Example() {
	runtime.LockOSThread() // SINGLE_ISSUER/DEFER_TASKRUN rings belong to one thread
	defer runtime.UnlockOSThread()

	r, err := uring.Setup(8, uring.WithDeferTaskrun())
	if err != nil {
		// errors.Is(err, uring.ErrUnavailable): fall back to epoll here.
		fmt.Println(err)
		return
	}
	defer r.Close()

	s := r.GetSQE()
	s.PrepNop()
	s.SetUserData(42) // an integer tag, never a Go pointer

	if _, err := r.SubmitAndWaitTimeout(1, time.Second); err != nil {
		fmt.Println(err)
		return
	}
	var cqes [8]*uring.CQE
	n := r.PeekBatchCQE(cqes[:])
	for _, c := range cqes[:n] {
		fmt.Println("user_data", c.UserData, "res", c.Res, "err", c.Err())
	}
	r.CQAdvance(uint32(n))
	// Prints "user_data 42 res 0 err <nil>" where io_uring is available.
	// The example has no Output line so that it is compiled everywhere but
	// not run as a test: under a seccomp filter that blocks io_uring it
	// would print the setup error instead. TestNop checks the same round
	// trip and skips with the reason there.
}
