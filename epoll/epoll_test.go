//go:build linux

package epoll

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// newPoller returns a Poller closed at the end of the test.
func newPoller(t testing.TB) *Poller {
	t.Helper()
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// tcpPair returns a connected pair of non-blocking TCP sockets on 127.0.0.1,
// built with raw system calls so that Go's own netpoller never sees them.
func tcpPair(t testing.TB) (client, server int) {
	t.Helper()
	ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ln)
	if err := unix.Bind(ln, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(ln, 1); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(ln)
	if err != nil {
		t.Fatal(err)
	}
	client, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(client) })
	// A blocking connect to a listening loopback socket completes at once.
	if err := unix.Connect(client, sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(client, true); err != nil {
		t.Fatal(err)
	}
	server, _, err = unix.Accept4(ln, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(server) })
	return client, server
}

// waitOne waits up to a second and requires exactly one event.
func waitOne(t *testing.T, p *Poller) Event {
	t.Helper()
	ev := make([]Event, 8)
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		n, err := p.Wait(ev, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			continue // EINTR
		}
		if n != 1 {
			t.Fatalf("Wait returned %d events, want 1: %+v", n, ev[:n])
		}
		return ev[0]
	}
	t.Fatal("no event within 1s")
	return Event{}
}

// poll does a non-blocking Wait and returns the events.
func poll(t *testing.T, p *Poller) []Event {
	t.Helper()
	ev := make([]Event, 8)
	n, err := p.Wait(ev, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ev[:n]
}

func write(t *testing.T, fd int, s string) {
	t.Helper()
	if _, err := unix.Write(fd, []byte(s)); err != nil {
		t.Fatal(err)
	}
}

func TestEpollEventLayout(t *testing.T) {
	// setData/getData rely on Fd and Pad being the 8 bytes of the kernel's
	// epoll_data union, at the end of the struct. unsafe is used only to
	// inspect the layout, never to access memory.
	var ev unix.EpollEvent
	if off := unsafe.Offsetof(ev.Pad); off != unsafe.Offsetof(ev.Fd)+4 {
		t.Fatalf("Pad at offset %d, want Fd+4", off)
	}
	if size := unsafe.Sizeof(ev); size != unsafe.Offsetof(ev.Fd)+8 {
		t.Fatalf("sizeof(EpollEvent) = %d, want Fd offset + 8", size)
	}
	for _, d := range []uint64{0, 1, 0xffffffff, 1 << 32, 0x0102030405060708, ReservedData - 1, ReservedData} {
		setData(&ev, d)
		if got := getData(&ev); got != d {
			t.Errorf("round trip of %#x gave %#x", d, got)
		}
	}
}

func TestDataRoundTripThroughKernel(t *testing.T) {
	for _, data := range []uint64{0, 7, 0xdeadbeef, 0x0102030405060708, 1 << 63, ReservedData - 1} {
		p := newPoller(t)
		_, server := tcpPair(t)
		if err := p.Add(server, Out, data); err != nil {
			t.Fatal(err)
		}
		if ev := waitOne(t, p); ev.Data != data || ev.Events&Out == 0 {
			t.Errorf("got %+v, want Out with data %#x", ev, data)
		}
	}
}

func TestReadiness(t *testing.T) {
	tests := []struct {
		name  string
		flags uint32
		// after a write and one reported event with nothing read, is the
		// fd reported again?
		again bool
	}{
		{"level", In, true},
		{"edge", In | EdgeTriggered, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPoller(t)
			client, server := tcpPair(t)
			if err := p.Add(server, tt.flags, 42); err != nil {
				t.Fatal(err)
			}
			if ev := poll(t, p); len(ev) != 0 {
				t.Fatalf("idle socket reported %+v", ev)
			}
			write(t, client, "hello")
			ev := waitOne(t, p)
			if ev.Data != 42 || ev.Events&In == 0 {
				t.Fatalf("got %+v, want In with data 42", ev)
			}
			again := len(poll(t, p)) > 0
			if again != tt.again {
				t.Fatalf("reported again without new data: %v, want %v", again, tt.again)
			}
			if tt.flags&EdgeTriggered != 0 {
				// A new edge: more data arrives.
				write(t, client, "more")
				if ev := waitOne(t, p); ev.Data != 42 || ev.Events&In == 0 {
					t.Fatalf("second edge: got %+v", ev)
				}
				if ev := poll(t, p); len(ev) != 0 {
					t.Fatalf("second edge reported twice: %+v", ev)
				}
			}
		})
	}
}

func TestOutReadiness(t *testing.T) {
	p := newPoller(t)
	client, _ := tcpPair(t)
	if err := p.Add(client, Out|EdgeTriggered, 9); err != nil {
		t.Fatal(err)
	}
	if ev := waitOne(t, p); ev.Data != 9 || ev.Events&Out == 0 || ev.Events&In != 0 {
		t.Fatalf("got %+v, want Out only with data 9", ev)
	}
	if ev := poll(t, p); len(ev) != 0 {
		t.Fatalf("edge-triggered Out reported twice: %+v", ev)
	}
}

func TestRDHupOnHalfClose(t *testing.T) {
	p := newPoller(t)
	client, server := tcpPair(t)
	if err := p.Add(server, In|RDHup|EdgeTriggered, 3); err != nil {
		t.Fatal(err)
	}
	if err := unix.Shutdown(client, unix.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	ev := waitOne(t, p)
	if ev.Events&RDHup == 0 || ev.Data != 3 {
		t.Fatalf("got %+v, want RDHup with data 3", ev)
	}
	if ev.Events&Hup != 0 {
		t.Fatalf("half close reported full Hup: %+v", ev)
	}
}

func TestMod(t *testing.T) {
	p := newPoller(t)
	client, server := tcpPair(t)
	if err := p.Add(server, In, 1); err != nil {
		t.Fatal(err)
	}
	write(t, client, "x")
	if ev := waitOne(t, p); ev.Data != 1 {
		t.Fatalf("got %+v", ev)
	}
	// Switch interest to Out with a new token.
	if err := p.Mod(server, Out, 2); err != nil {
		t.Fatal(err)
	}
	if ev := waitOne(t, p); ev.Data != 2 || ev.Events&Out == 0 || ev.Events&In != 0 {
		t.Fatalf("after Mod got %+v, want Out only with data 2", ev)
	}
	if err := p.Del(server); err != nil {
		t.Fatal(err)
	}
	if ev := poll(t, p); len(ev) != 0 {
		t.Fatalf("deleted fd reported %+v", ev)
	}
}

func TestOneShot(t *testing.T) {
	p := newPoller(t)
	_, server := tcpPair(t)
	if err := p.Add(server, Out|OneShot, 5); err != nil {
		t.Fatal(err)
	}
	waitOne(t, p)
	if ev := poll(t, p); len(ev) != 0 {
		t.Fatalf("one-shot fired twice: %+v", ev)
	}
	if err := p.Mod(server, Out|OneShot, 6); err != nil {
		t.Fatal(err)
	}
	if ev := waitOne(t, p); ev.Data != 6 {
		t.Fatalf("re-armed one-shot got %+v", ev)
	}
}

func TestCtlErrors(t *testing.T) {
	p := newPoller(t)
	_, server := tcpPair(t)
	if err := p.Add(server, In, 1); err != nil {
		t.Fatal(err)
	}
	_, other := tcpPair(t)
	closedFd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(closedFd)

	tests := []struct {
		name string
		op   func() error
		want error
	}{
		{"add bad fd", func() error { return p.Add(-1, In, 1) }, unix.EBADF},
		{"add closed fd", func() error { return p.Add(closedFd, In, 1) }, unix.EBADF},
		{"add twice", func() error { return p.Add(server, In, 1) }, unix.EEXIST},
		{"mod unregistered", func() error { return p.Mod(other, In, 1) }, unix.ENOENT},
		{"mod bad fd", func() error { return p.Mod(-1, In, 1) }, unix.EBADF},
		{"del unregistered", func() error { return p.Del(other) }, unix.ENOENT},
		{"del bad fd", func() error { return p.Del(closedFd) }, unix.EBADF},
		{"add reserved data", func() error { return p.Add(other, In, ReservedData) }, ErrReserved},
		{"mod reserved data", func() error { return p.Mod(server, In, ReservedData) }, ErrReserved},
		{"add eventfd", func() error { return p.Add(p.efd, In, 1) }, ErrReserved},
		{"del eventfd", func() error { return p.Del(p.efd) }, ErrReserved},
		{"wait empty", func() error { _, err := p.Wait(nil, 0); return err }, unix.EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.op()
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want an error wrapping %v", err, tt.want)
			}
		})
	}
}

func TestWaitTimeout(t *testing.T) {
	p := newPoller(t)
	ev := make([]Event, 4)
	for _, d := range []time.Duration{0, time.Nanosecond, 20 * time.Millisecond} {
		start := time.Now()
		n, err := p.Wait(ev, d)
		if n != 0 || err != nil {
			t.Fatalf("Wait(%v) = %d, %v; want 0, nil", d, n, err)
		}
		if el := time.Since(start); el > d+time.Second {
			t.Fatalf("Wait(%v) took %v", d, el)
		}
	}
}

func TestMsec(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want int
	}{
		{-1, -1},
		{-time.Hour, -1},
		{0, 0},
		{1, 1},
		{time.Millisecond, 1},
		{time.Millisecond + 1, 2},
		{1500 * time.Microsecond, 2},
		{time.Second, 1000},
		{time.Duration(1<<63 - 1), 1<<31 - 1},
	}
	for _, tt := range tests {
		if got := msec(tt.in); got != tt.want {
			t.Errorf("msec(%v) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestWakeUnblocksWait(t *testing.T) {
	p := newPoller(t)
	done := make(chan time.Duration, 1)
	tid := make(chan int, 1)
	go func() {
		runtime.LockOSThread() // so its thread can be watched blocking
		defer runtime.UnlockOSThread()
		tid <- unix.Gettid()
		ev := make([]Event, 4)
		start := time.Now()
		n, err := p.Wait(ev, 10*time.Second)
		if n != 0 || err != nil {
			t.Errorf("woken Wait = %d, %v; want 0, nil", n, err)
		}
		done <- time.Since(start)
	}()
	// Wake only once the thread sleeps in epoll_pwait, so this tests
	// waking a blocked Wait (TestWakeBeforeWait covers the other order).
	syscallFile := fmt.Sprintf("/proc/self/task/%d/syscall", <-tid)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(syscallFile)
		return err == nil && strings.HasPrefix(string(b), strconv.Itoa(unix.SYS_EPOLL_PWAIT)+" ")
	}, 5*time.Second, time.Millisecond, "Wait never blocked in epoll_pwait")
	if err := p.Wake(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Wake did not unblock Wait within 2s")
	}
}

func TestWakeBeforeWait(t *testing.T) {
	p := newPoller(t)
	if err := p.Wake(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, err := p.Wait(make([]Event, 1), 5*time.Second)
	if n != 0 || err != nil {
		t.Fatalf("Wait = %d, %v", n, err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("pending wake not seen: Wait took %v", el)
	}
}

// TestWakesCoalesce sends many concurrent Wakes and checks that one Wait
// consumes all of them: afterwards nothing is pending and the eventfd is
// empty.
func TestWakesCoalesce(t *testing.T) {
	p := newPoller(t)
	client, server := tcpPair(t)
	if err := p.Add(server, In, 77); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if err := p.Wake(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	write(t, client, "x")
	// The eventfd and the socket are both ready; one Wait takes both and
	// returns only the socket.
	ev := waitOne(t, p)
	if ev.Data != 77 {
		t.Fatalf("got %+v", ev)
	}
	if p.pending.Load() {
		t.Fatal("wakeup still pending after Wait")
	}
	var b [8]byte
	if _, err := unix.Read(p.efd, b[:]); err != unix.EAGAIN {
		t.Fatalf("eventfd not drained: read err = %v", err)
	}
	if err := p.Del(server); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Wait(make([]Event, 4), 0); n != 0 || err != nil {
		t.Fatalf("after drain Wait = %d, %v", n, err)
	}
}

// TestNoLostWakeups hammers Wake from several goroutines while the owner
// publishes-then-waits like a reactor. Every increment is followed by a
// Wake, so a Wait that times out while increments are unseen is a lost
// wakeup.
func TestNoLostWakeups(t *testing.T) {
	p := newPoller(t)
	const producers, perProducer = 4, 5000
	var counter atomic.Int64
	var wg sync.WaitGroup
	for i := range producers {
		wg.Go(func() {
			for j := range perProducer {
				counter.Add(1)
				if err := p.Wake(); err != nil {
					t.Error(err)
					return
				}
				if (i+j)%512 == 0 {
					time.Sleep(50 * time.Microsecond)
				}
			}
		})
	}
	ev := make([]Event, 4)
	var seen int64
	for seen < producers*perProducer {
		if c := counter.Load(); c > seen {
			seen = c
			continue
		}
		start := time.Now()
		if _, err := p.Wait(ev, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) >= 3*time.Second {
			t.Fatalf("lost wakeup: saw %d of %d increments (counter %d)",
				seen, producers*perProducer, counter.Load())
		}
	}
	wg.Wait()
}

// TestWaitReleasesP checks that a Wait blocked in the kernel does not hold
// the only P. With a non-releasing raw system call, sysmon would preempt the
// blocked thread with a signal, which interrupts epoll_wait (EINTR) and makes
// Wait return before it was woken.
func TestWaitReleasesP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := newPoller(t)
	var woken atomic.Bool
	done := make(chan bool, 1)
	go func() {
		_, err := p.Wait(make([]Event, 1), 5*time.Second)
		if err != nil {
			t.Error(err)
		}
		done <- woken.Load()
	}()
	// Other goroutines must keep running on the single P meanwhile.
	spin := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(spin) {
		runtime.Gosched()
	}
	woken.Store(true)
	if err := p.Wake(); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("Wait returned before Wake: it was interrupted while holding the P")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait not woken")
	}
}

func TestClose(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	_, server := tcpPair(t)
	p.Wake() // leave a wakeup pending: Wake must still report ErrClosed
	for i := range 3 {
		if err := p.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	tests := []struct {
		name string
		op   func() error
	}{
		{"add", func() error { return p.Add(server, In, 1) }},
		{"mod", func() error { return p.Mod(server, In, 1) }},
		{"del", func() error { return p.Del(server) }},
		{"wait", func() error { _, err := p.Wait(make([]Event, 1), 0); return err }},
		{"wake", p.Wake},
	}
	for _, tt := range tests {
		if err := tt.op(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: got %v, want ErrClosed", tt.name, err)
		}
	}
}

// TestWakeDuringClose races Wakes against Close (meaningful under -race).
func TestWakeDuringClose(t *testing.T) {
	for range 20 {
		p, err := New()
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 100 {
					if err := p.Wake(); err != nil && !errors.Is(err, ErrClosed) {
						t.Error(err)
					}
					// Drain so that Wake keeps reaching the fd.
					p.pending.Store(false)
				}
			})
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
}

func TestNoLeakedFds(t *testing.T) {
	before := countFds(t)
	for range 50 {
		p, err := New()
		if err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	if after := countFds(t); after != before {
		t.Fatalf("fd count %d -> %d", before, after)
	}
}

func countFds(t *testing.T) int {
	t.Helper()
	fd, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 1<<16)
	n := 0
	for {
		m, err := unix.ReadDirent(fd, buf)
		if err != nil {
			t.Fatal(err)
		}
		if m == 0 {
			break
		}
		_, c, _ := unix.ParseDirent(buf[:m], -1, nil)
		n += c
	}
	return n
}

func TestWaitAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("alloc counting")
	}
	p := newPoller(t)
	client, server := tcpPair(t)
	if err := p.Add(server, In, 1); err != nil { // level: stays ready
		t.Fatal(err)
	}
	write(t, client, "x")
	ev := make([]Event, 16)
	p.Wait(ev, time.Second) // first call sizes the internal buffer
	tests := []struct {
		name string
		fn   func()
	}{
		{"ready fd", func() { p.Wait(ev, 0) }},
		{"wake and wait", func() { p.Wake(); p.Wait(ev, 0) }},
		{"empty poll", func() { p.Wait(ev[:1], 0) }},
	}
	for _, tt := range tests {
		if a := testing.AllocsPerRun(200, tt.fn); a != 0 {
			t.Errorf("%s: %v allocs per Wait, want 0", tt.name, a)
		}
	}
}

func BenchmarkWakeWait(b *testing.B) {
	p := newPoller(b)
	ev := make([]Event, 8)
	b.ReportAllocs()
	for b.Loop() {
		p.Wake()
		p.Wait(ev, 0)
	}
}

func BenchmarkWakeCoalesced(b *testing.B) {
	p := newPoller(b)
	p.Wake()
	b.ReportAllocs()
	for b.Loop() {
		p.Wake()
	}
}
