package uring

import (
	"errors"
	"runtime"
	"testing"
	"time"
)

func newRing(t testing.TB, entries uint32, opts ...Option) *Ring {
	t.Helper()
	r, err := Setup(entries, opts...)
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			t.Skip("io_uring unavailable:", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestSmokeNop(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, opts := range [][]Option{nil, {WithSingleIssuer()}, {WithDeferTaskrun()}, {WithCoopTaskrun()}} {
		r := newRing(t, 8, opts...)
		t.Logf("flags %#x features %#x", r.Flags(), r.Features())
		s := r.GetSQE()
		s.PrepNop()
		s.SetUserData(42)
		if n, err := r.SubmitAndWaitTimeout(1, time.Second); err != nil || n != 1 {
			t.Fatal(n, err)
		}
		var cq [4]*CQE
		n := r.PeekBatchCQE(cq[:])
		if n != 1 || cq[0].UserData != 42 || cq[0].Res != 0 {
			t.Fatal(n)
		}
		r.CQAdvance(1)
	}
}
