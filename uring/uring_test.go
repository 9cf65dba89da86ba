//go:build linux

// Linux only: io_uring is a Linux interface.

package uring

import (
	"bytes"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/internal/backendtest"
)

// newRing sets up a ring or skips the test when io_uring is unavailable.
func newRing(t testing.TB, entries uint32, opts ...Option) *Ring {
	t.Helper()
	r, err := Setup(entries, opts...)
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			backendtest.SkipUnavailable(t, "uring", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// lockThread pins the test goroutine to its OS thread for rings created
// with SINGLE_ISSUER / DEFER_TASKRUN.
func lockThread(t testing.TB) {
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
}

// waitOne waits up to d for a CQE, copies it out and marks it seen.
func waitOne(t testing.TB, r *Ring, d time.Duration) CQE {
	t.Helper()
	c, err := r.WaitCQETimeout(d)
	if err != nil {
		t.Fatalf("WaitCQETimeout: %v", err)
	}
	v := *c
	r.CQESeen(c)
	return v
}

// waitN collects n CQEs (submitting pending SQEs first), keyed by user_data.
func waitN(t testing.TB, r *Ring, n int, d time.Duration) map[uint64]CQE {
	t.Helper()
	if _, err := r.Submit(); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	out := make(map[uint64]CQE, n)
	deadline := time.Now().Add(d)
	for len(out) < n {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("got %d of %d CQEs before timeout: %v", len(out), n, out)
		}
		v := waitOne(t, r, left)
		out[v.UserData] = v
	}
	return out
}

var setupVariants = []struct {
	name string
	opts []Option
}{
	{"default", nil},
	{"single_issuer", []Option{WithSingleIssuer()}},
	{"defer_taskrun", []Option{WithDeferTaskrun()}},
	{"coop_taskrun", []Option{WithCoopTaskrun()}},
	{"submit_all+clamp", []Option{WithSubmitAll(), WithClamp()}},
	{"cqsize", []Option{WithCQSize(64)}},
	{"sqpoll", []Option{WithSQPoll(10 * time.Millisecond)}},
}

func TestNopRoundTrip(t *testing.T) {
	for _, v := range setupVariants {
		t.Run(v.name, func(t *testing.T) {
			lockThread(t)
			r := newRing(t, 8, v.opts...)
			for round := 0; round < 3; round++ {
				for i := 0; i < 4; i++ {
					s := r.GetSQE()
					if s == nil {
						t.Fatal("GetSQE: nil on an empty ring")
					}
					s.PrepNop()
					s.SetUserData(uint64(round*10 + i))
				}
				if got := r.SQReady(); got != 4 {
					t.Fatalf("SQReady = %d, want 4", got)
				}
				got := waitN(t, r, 4, 2*time.Second)
				for i := 0; i < 4; i++ {
					c, ok := got[uint64(round*10+i)]
					if !ok || c.Res != 0 || c.Err() != nil {
						t.Fatalf("round %d: nop %d: %+v (present %v)", round, i, c, ok)
					}
				}
				if r.CQReady() != 0 {
					t.Fatalf("CQReady = %d after reaping", r.CQReady())
				}
			}
		})
	}
}

func TestGetSQEFullAndZeroed(t *testing.T) {
	r := newRing(t, 4)
	for i := uint32(0); i < r.SQEntries(); i++ {
		s := r.GetSQE()
		if s == nil {
			t.Fatalf("GetSQE nil at %d", i)
		}
		s.PrepRead(5, make([]byte, 8), 77) // dirty it
		s.SetUserData(uint64(i))
	}
	if r.GetSQE() != nil || r.SQSpace() != 0 {
		t.Fatal("GetSQE on a full SQ must return nil")
	}
	// Turn them into NOPs, submit, reap; the recycled slots must come back zeroed.
	for i := range r.sqes {
		ud := r.sqes[i].UData
		r.sqes[i] = SQE{}
		r.sqes[i].PrepNop()
		r.sqes[i].SetUserData(ud)
	}
	waitN(t, r, int(r.SQEntries()), 2*time.Second)
	s := r.GetSQE()
	if *s != (SQE{}) {
		t.Fatalf("GetSQE returned a dirty SQE: %+v", *s)
	}
}

func TestSetupErrors(t *testing.T) {
	_, err := Setup(0)
	var se *SetupError
	if !errors.As(err, &se) || se.Errno != unix.EINVAL {
		t.Fatalf("Setup(0) = %v, want SetupError EINVAL", err)
	}
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, unix.EINVAL) {
		t.Fatalf("errors.Is mismatch for %v", err)
	}
	for _, tc := range []struct {
		errno       unix.Errno
		unavailable bool
	}{
		{unix.ENOSYS, true}, {unix.EPERM, true}, {unix.ENOMEM, true}, {unix.EINVAL, true}, {unix.EMFILE, false},
	} {
		err := error(&SetupError{Errno: tc.errno, Reason: setupReason(tc.errno, "io_uring_setup")})
		if errors.Is(err, ErrUnavailable) != tc.unavailable || !errors.Is(err, tc.errno) {
			t.Errorf("%v: Is(ErrUnavailable)=%v", tc.errno, errors.Is(err, ErrUnavailable))
		}
		if err.Error() == "" {
			t.Error("empty message")
		}
	}
	if msg := (&SetupError{Errno: unix.EPERM, Reason: setupReason(unix.EPERM, "")}).Error(); !bytes.Contains([]byte(msg), []byte("seccomp")) {
		t.Errorf("EPERM message does not name the cause: %q", msg)
	}
}

func TestCloseIdempotent(t *testing.T) {
	r := newRing(t, 4)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Submit(); err != ErrClosed {
		t.Fatalf("Submit after Close = %v", err)
	}
	if _, err := r.PeekCQE(); err != ErrClosed {
		t.Fatalf("PeekCQE after Close = %v", err)
	}
}

func TestPeekCQEEmpty(t *testing.T) {
	r := newRing(t, 4)
	if _, err := r.PeekCQE(); err != unix.EAGAIN {
		t.Fatalf("PeekCQE on empty ring = %v, want EAGAIN", err)
	}
	if n := r.PeekBatchCQE(make([]*CQE, 4)); n != 0 {
		t.Fatalf("PeekBatchCQE = %d", n)
	}
}

func TestTimeouts(t *testing.T) {
	// Subtests run on other goroutines (threads), so this ring is not
	// SINGLE_ISSUER.
	r := newRing(t, 8)

	t.Run("timeout_op_fires", func(t *testing.T) {
		ts := &unix.Timespec{Nsec: int64(20 * time.Millisecond)}
		s := r.GetSQE()
		s.PrepTimeout(ts, 0, 0)
		s.SetUserData(1)
		start := time.Now()
		c := waitN(t, r, 1, 2*time.Second)[1]
		if c.Err() != unix.ETIME {
			t.Fatalf("timeout CQE: %+v", c)
		}
		if el := time.Since(start); el < 15*time.Millisecond {
			t.Fatalf("timeout fired after %v", el)
		}
		runtime.KeepAlive(ts)
	})

	t.Run("timeout_removed", func(t *testing.T) {
		ts := &unix.Timespec{Sec: 10}
		s := r.GetSQE()
		s.PrepTimeout(ts, 0, 0)
		s.SetUserData(1)
		s = r.GetSQE()
		s.PrepTimeoutRemove(1, 0)
		s.SetUserData(2)
		got := waitN(t, r, 2, 2*time.Second)
		if errOf(got[1]) != unix.ECANCELED || got[2].Res != 0 {
			t.Fatalf("timeout remove: %+v", got)
		}
		runtime.KeepAlive(ts)
	})

	t.Run("wait_cqe_timeout", func(t *testing.T) {
		start := time.Now()
		_, err := r.WaitCQETimeout(30 * time.Millisecond)
		if !errors.Is(err, unix.ETIME) {
			t.Fatalf("WaitCQETimeout = %v, want ETIME", err)
		}
		if el := time.Since(start); el < 25*time.Millisecond || el > time.Second {
			t.Fatalf("waited %v", el)
		}
	})

	t.Run("submit_and_wait_timeout", func(t *testing.T) {
		start := time.Now()
		n, err := r.SubmitAndWaitTimeout(1, 30*time.Millisecond)
		if err != nil || n != 0 {
			t.Fatalf("SubmitAndWaitTimeout = %d, %v", n, err)
		}
		if el := time.Since(start); el < 25*time.Millisecond || el > time.Second {
			t.Fatalf("waited %v", el)
		}
		s := r.GetSQE()
		s.PrepNop()
		s.SetUserData(9)
		n, err = r.SubmitAndWaitTimeout(1, time.Second)
		if err != nil || n != 1 || r.CQReady() != 1 {
			t.Fatalf("SubmitAndWaitTimeout with a NOP = %d, %v (ready %d)", n, err, r.CQReady())
		}
		r.CQAdvance(1)
		// d == 0 polls.
		if n, err := r.SubmitAndWaitTimeout(1, 0); err != nil || n != 0 {
			t.Fatalf("SubmitAndWaitTimeout(0) = %d, %v", n, err)
		}
	})
}

func TestCQOverflowLosesNothing(t *testing.T) {
	const total = 5000
	for _, v := range []struct {
		name string
		opts []Option
	}{
		{"default", []Option{WithCQSize(16)}},
		{"defer_taskrun", []Option{WithCQSize(16), WithDeferTaskrun()}},
		{"coop_taskrun", []Option{WithCQSize(16), WithCoopTaskrun()}},
	} {
		t.Run(v.name, func(t *testing.T) {
			lockThread(t)
			r := newRing(t, 8, v.opts...)
			if r.Features()&FeatNoDrop == 0 {
				t.Skip("kernel lacks IORING_FEAT_NODROP")
			}
			seen := make([]bool, total)
			count := 0
			sawOverflow := false
			cqes := make([]*CQE, 8)
			reap := func() {
				n := r.PeekBatchCQE(cqes)
				for _, c := range cqes[:n] {
					if c.Res != 0 || c.UserData >= total || seen[c.UserData] {
						t.Fatalf("bad CQE %+v", *c)
					}
					seen[c.UserData] = true
					count++
				}
				r.CQAdvance(uint32(n))
			}
			// Submit everything without reaping (except when the kernel
			// pushes back), so the 16-entry CQ overflows many times over.
			for i := 0; i < total; {
				s := r.GetSQE()
				if s == nil {
					if _, err := r.Submit(); err != nil {
						if err == unix.EBUSY || err == unix.EAGAIN {
							reap()
							continue
						}
						t.Fatal(err)
					}
					if atomic.LoadUint32(r.sqFlags)&SQCQOverflow != 0 {
						sawOverflow = true
					}
					continue
				}
				s.PrepNop()
				s.SetUserData(uint64(i))
				i++
			}
			if _, err := r.Submit(); err != nil {
				t.Fatal(err)
			}
			if atomic.LoadUint32(r.sqFlags)&SQCQOverflow != 0 {
				sawOverflow = true
			}
			deadline := time.Now().Add(5 * time.Second)
			for count < total && time.Now().Before(deadline) {
				reap()
			}
			if count != total {
				t.Fatalf("reaped %d of %d completions", count, total)
			}
			if !sawOverflow {
				t.Error("CQ never overflowed; the test did not exercise the overflow path")
			}
			if d := r.CQOverflow(); d != 0 {
				t.Fatalf("kernel dropped %d CQEs", d)
			}
		})
	}
}

func TestProbe(t *testing.T) {
	r := newRing(t, 4)
	p, err := r.Probe()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		op   uint8
		name string
		want bool
	}{
		{OpNop, "nop", true},
		{OpReadv, "readv", true},
		{OpAccept, "accept", true},
		{OpRecv, "recv", true},
		{OpSend, "send", true},
		{OpAsyncCancel, "async_cancel", true},
		{OpMsgRing, "msg_ring", true},
		{OpSocket, "socket", true},
		{OpSendZC, "send_zc", true},
		{255, "255", false},
	} {
		if got := p.Supported(tc.op); got != tc.want {
			t.Errorf("Supported(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
	if p.LastOp() < OpSendZC {
		t.Errorf("LastOp = %d", p.LastOp())
	}
	var nilProbe *Probe
	if nilProbe.Supported(OpNop) {
		t.Error("nil probe supports nothing")
	}
}

func TestRegisterRingFd(t *testing.T) {
	lockThread(t)
	r := newRing(t, 4, WithSingleIssuer())
	if err := r.RegisterRingFd(); err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterRingFd(); err != unix.EEXIST {
		t.Fatalf("second RegisterRingFd = %v", err)
	}
	for i := 0; i < 3; i++ {
		s := r.GetSQE()
		s.PrepNop()
		s.SetUserData(uint64(i))
	}
	waitN(t, r, 3, time.Second)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// The per-thread table has 16 slots: Close must give them back.
	for i := 0; i < 40; i++ {
		r := newRing(t, 2, WithSingleIssuer())
		if err := r.RegisterRingFd(); err != nil {
			t.Fatalf("ring %d: RegisterRingFd: %v (slots leaked by Close?)", i, err)
		}
		s := r.GetSQE()
		s.PrepNop()
		s.SetUserData(1)
		waitN(t, r, 1, time.Second)
		r.Close()
	}
}

func TestPipeOps(t *testing.T) {
	r := newRing(t, 16) // not SINGLE_ISSUER: subtests run on other threads
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])

	t.Run("write_read", func(t *testing.T) {
		out := []byte("hello, ring")
		in := make([]byte, 64)
		s := r.GetSQE()
		s.PrepWrite(p[1], out, ^uint64(0))
		s.SetUserData(1)
		s.SetFlags(SQEIOLink)
		s = r.GetSQE()
		s.PrepRead(p[0], in, ^uint64(0))
		s.SetUserData(2)
		got := waitN(t, r, 2, time.Second)
		if got[1].Res != int32(len(out)) || got[2].Res != int32(len(out)) || !bytes.Equal(in[:len(out)], out) {
			t.Fatalf("write/read: %+v %q", got, in)
		}
	})

	t.Run("writev_readv", func(t *testing.T) {
		a, b := []byte("abc"), []byte("defgh")
		iovs := make([]unix.Iovec, 2)
		iovs[0].Base, iovs[1].Base = &a[0], &b[0]
		iovs[0].SetLen(len(a))
		iovs[1].SetLen(len(b))
		x, y := make([]byte, 4), make([]byte, 4)
		riovs := make([]unix.Iovec, 2)
		riovs[0].Base, riovs[1].Base = &x[0], &y[0]
		riovs[0].SetLen(4)
		riovs[1].SetLen(4)
		s := r.GetSQE()
		s.PrepWritev(p[1], iovs, ^uint64(0))
		s.SetUserData(1)
		s.SetFlags(SQEIOLink)
		s = r.GetSQE()
		s.PrepReadv(p[0], riovs, ^uint64(0))
		s.SetUserData(2)
		got := waitN(t, r, 2, time.Second)
		if got[1].Res != 8 || got[2].Res != 8 || string(x)+string(y) != "abcdefgh" {
			t.Fatalf("writev/readv: %+v %q %q", got, x, y)
		}
		runtime.KeepAlive(a)
		runtime.KeepAlive(b)
	})

	t.Run("poll_add", func(t *testing.T) {
		s := r.GetSQE()
		s.PrepPollAdd(p[0], unix.POLLIN)
		s.SetUserData(1)
		r.Submit()
		if _, err := r.WaitCQETimeout(20 * time.Millisecond); !errors.Is(err, unix.ETIME) {
			t.Fatalf("poll completed on an empty pipe: %v", err)
		}
		unix.Write(p[1], []byte("x"))
		c := waitOne(t, r, time.Second)
		if c.UserData != 1 || c.Res&unix.POLLIN == 0 {
			t.Fatalf("poll CQE %+v", c)
		}
		unix.Read(p[0], make([]byte, 1))
	})

	t.Run("poll_multishot_remove", func(t *testing.T) {
		s := r.GetSQE()
		s.PrepPollMultishot(p[1], unix.POLLOUT)
		s.SetUserData(7)
		r.Submit()
		c := waitOne(t, r, time.Second)
		if c.UserData != 7 || !c.More() || c.Res&unix.POLLOUT == 0 {
			t.Fatalf("multishot poll CQE %+v", c)
		}
		s = r.GetSQE()
		s.PrepPollRemove(7)
		s.SetUserData(8)
		r.Submit()
		deadline := time.Now().Add(time.Second)
		var removed, final bool
		for !(removed && final) && time.Now().Before(deadline) {
			c := waitOne(t, r, time.Second)
			switch {
			case c.UserData == 8:
				removed = c.Res == 0
			case c.UserData == 7 && !c.More():
				final = true
			}
		}
		if !removed || !final {
			t.Fatalf("poll remove: removed=%v final=%v", removed, final)
		}
	})

	t.Run("fixed_files", func(t *testing.T) {
		if err := r.RegisterFilesSparse(4); err != nil {
			t.Fatal(err)
		}
		if err := r.RegisterFilesUpdate(2, []int32{int32(p[1])}); err != nil {
			t.Fatal(err)
		}
		msg := []byte("fixed")
		s := r.GetSQE()
		s.PrepWrite(2, msg, ^uint64(0))
		s.SetFlags(SQEFixedFile)
		s.SetUserData(1)
		if c := waitN(t, r, 1, time.Second)[1]; c.Res != int32(len(msg)) {
			t.Fatalf("fixed write %+v", c)
		}
		buf := make([]byte, 16)
		n, _ := unix.Read(p[0], buf)
		if string(buf[:n]) != "fixed" {
			t.Fatalf("read %q", buf[:n])
		}
		if err := r.UnregisterFiles(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("splice", func(t *testing.T) {
		var q [2]int
		if err := unix.Pipe2(q[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(q[0])
		defer unix.Close(q[1])
		unix.Write(p[1], []byte("spliced"))
		s := r.GetSQE()
		s.PrepSplice(p[0], -1, q[1], -1, 7, 0)
		s.SetUserData(1)
		if c := waitN(t, r, 1, time.Second)[1]; c.Res != 7 {
			t.Fatalf("splice %+v", c)
		}
		buf := make([]byte, 16)
		n, _ := unix.Read(q[0], buf)
		if string(buf[:n]) != "spliced" {
			t.Fatalf("read %q", buf[:n])
		}
	})

	t.Run("close", func(t *testing.T) {
		fd, err := unix.Dup(p[0])
		if err != nil {
			t.Fatal(err)
		}
		s := r.GetSQE()
		s.PrepClose(fd)
		s.SetUserData(1)
		if c := waitN(t, r, 1, time.Second)[1]; c.Res != 0 {
			t.Fatalf("close %+v", c)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
			t.Fatalf("fd still open after PrepClose: %v", err)
		}
	})
}

func TestMsgRing(t *testing.T) {
	lockThread(t)
	a := newRing(t, 4)
	b := newRing(t, 4, WithDeferTaskrun())
	s := a.GetSQE()
	s.PrepMsgRing(b.Fd(), 1234, 0xfeedface, 0)
	s.SetUserData(1)
	if c := waitN(t, a, 1, time.Second)[1]; c.Res != 0 {
		t.Fatalf("sender CQE %+v", c)
	}
	c := waitOne(t, b, time.Second)
	if c.UserData != 0xfeedface || c.Res != 1234 {
		t.Fatalf("target CQE %+v", c)
	}
}

func TestZeroAllocs(t *testing.T) {
	lockThread(t)
	r := newRing(t, 64, WithDeferTaskrun())
	cqes := make([]*CQE, 64)
	allocs := testing.AllocsPerRun(200, func() {
		for i := 0; i < 32; i++ {
			s := r.GetSQE()
			s.PrepNop()
			s.SetUserData(uint64(i))
		}
		r.Submit()
		n := r.PeekBatchCQE(cqes)
		r.CQAdvance(uint32(n))
		if _, err := r.PeekCQE(); err != unix.EAGAIN {
			panic(err)
		}
		r.SubmitAndWaitTimeout(0, 0)
	})
	if allocs != 0 {
		t.Fatalf("submit/peek path allocates %v times per run", allocs)
	}
}

func TestLayout(t *testing.T) {
	var s SQE
	for _, f := range []struct {
		name      string
		got, want uintptr
	}{
		{"fd", unsafe.Offsetof(s.Fd), 4},
		{"off", unsafe.Offsetof(s.Off), 8},
		{"addr", unsafe.Offsetof(s.Addr), 16},
		{"len", unsafe.Offsetof(s.Len), 24},
		{"op_flags", unsafe.Offsetof(s.OpFlags), 28},
		{"user_data", unsafe.Offsetof(s.UData), 32},
		{"buf_index", unsafe.Offsetof(s.BufIndex), 40},
		{"personality", unsafe.Offsetof(s.Personality), 42},
		{"file_index", unsafe.Offsetof(s.FileIndex), 44},
		{"addr3", unsafe.Offsetof(s.Addr3), 48},
	} {
		if f.got != f.want {
			t.Errorf("SQE.%s at %d, want %d", f.name, f.got, f.want)
		}
	}
	var p params
	if unsafe.Offsetof(p.sqOff) != 40 || unsafe.Offsetof(p.cqOff) != 80 {
		t.Errorf("params offsets %d %d", unsafe.Offsetof(p.sqOff), unsafe.Offsetof(p.cqOff))
	}
}

func errOf(c CQE) error { return c.Err() }

// TestWaker: a Wake from another goroutine completes the armed read and
// ends a wait that would otherwise block for the full timeout.
func TestWaker(t *testing.T) {
	r := newRing(t, 8)
	w, err := NewWaker()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.PrepArm(r.GetSQE(), 42)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	woke := make(chan error, 1)
	go func() { woke <- w.Wake() }()
	cqe := waitOne(t, r, 10*time.Second)
	if err := <-woke; err != nil {
		t.Fatal(err)
	}
	if cqe.UserData != 42 || cqe.Res != 8 {
		t.Fatalf("cqe %+v, want user_data 42 and an 8-byte read", cqe)
	}
	w.Completed()
	if w.Armed() {
		t.Fatal("still armed after Completed")
	}
}

// TestSubmitAndWaitMin checks the batched wait's ways out: the count
// reached (long before a generous minimum wait), the minimum wait over
// with fewer but some, and, with none at the minimum, the first event that
// comes after it rather than an empty return at the minimum. The steps
// run in order on one locked thread (SINGLE_ISSUER rules out subtests).
func TestSubmitAndWaitMin(t *testing.T) {
	lockThread(t)
	r := newRing(t, 8, WithSingleIssuer(), WithDeferTaskrun())
	if r.Features()&FeatMinTimeout == 0 {
		if _, err := r.SubmitAndWaitMin(2, time.Second, time.Millisecond); !errors.Is(err, unix.EOPNOTSUPP) {
			t.Fatalf("without FEAT_MIN_TIMEOUT: %v, want EOPNOTSUPP", err)
		}
		t.Skip("kernel lacks IORING_FEAT_MIN_TIMEOUT (6.12+)")
	}
	reap := func() int {
		n := int(r.CQReady())
		r.CQAdvance(uint32(n))
		return n
	}

	// Count reached: with a minimum wait of a minute, only the count can
	// end this wait within the test's time.
	for i := 0; i < 2; i++ {
		r.GetSQE().PrepNop()
	}
	if _, err := r.SubmitAndWaitMin(2, -1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := reap(); n != 2 {
		t.Fatalf("count reached: ready %d, want 2", n)
	}

	// Fewer than asked, once the minimum wait is over.
	r.GetSQE().PrepNop()
	if _, err := r.SubmitAndWaitMin(4, -1, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := reap(); n != 1 {
		t.Fatalf("after the minimum wait: ready %d, want 1", n)
	}

	// None at the minimum: the byte comes well after the 1 ms minimum, and
	// the wait must still be there to take it (an unlimited wait may not
	// end empty).
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	in := make([]byte, 8)
	s := r.GetSQE()
	s.PrepRead(p[0], in, ^uint64(0))
	s.SetUserData(7)
	go func() {
		time.Sleep(50 * time.Millisecond)
		unix.Write(p[1], []byte{1})
	}()
	if _, err := r.SubmitAndWaitMin(2, -1, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	c, err := r.PeekCQE()
	if err != nil || c.UserData != 7 || c.Res != 1 {
		t.Fatalf("none at the minimum: %+v, %v; want the read of 1 byte", c, err)
	}
	r.CQESeen(c)
	runtime.KeepAlive(in)

	// Nothing at all: the overall timeout ends the wait quietly.
	if n, err := r.SubmitAndWaitMin(2, 20*time.Millisecond, time.Millisecond); err != nil || n != 0 || r.CQReady() != 0 {
		t.Fatalf("overall timeout: %d, %v, ready %d; want a quiet timeout", n, err, r.CQReady())
	}
}
