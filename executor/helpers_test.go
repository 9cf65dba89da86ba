package executor

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// liveness is the generous deadline for anything that must finish: it only
// catches deadlocks and lost wake-ups, it never measures speed.
const liveness = 60 * time.Second

// waitGroup waits for wg or fails the test after the liveness deadline.
func waitGroup(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(liveness):
		t.Fatalf("%s: not done after %v (deadlock or lost wake-up?)", what, liveness)
	}
}

// waitGroupErr is waitGroup for goroutines other than the test's own: it
// reports with Errorf and returns false on timeout.
func waitGroupErr(t testing.TB, wg *sync.WaitGroup, what string) bool {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(liveness):
		t.Errorf("%s: not done after %v (deadlock or lost wake-up?)", what, liveness)
		return false
	}
}

// idleStats waits until every worker has parked (a parking worker has
// published its counters) and returns the pool's stats.
func idleStats(t testing.TB, p *Pool) PoolStats {
	t.Helper()
	var s PoolStats
	require.Eventually(t, func() bool {
		s = p.Stats()
		return s.Parked == p.Workers() && s.Spinning == 0
	}, liveness, time.Millisecond, "all workers parked")
	return s
}

func shutdown(t testing.TB, p *Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testLogger(buf *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, nil))
}

// testLoop is a Loop: one goroutine running posted functions in order.
// While it runs one, inLoop is true, which lets a function check that it is
// running on the loop rather than on the goroutine that completed a future.
type testLoop struct {
	ch     chan func()
	quit   chan struct{}
	inLoop bool // written and read only by the loop goroutine
	mu     sync.Mutex
	closed bool
	posts  int
}

func newTestLoop(t testing.TB) *testLoop {
	l := &testLoop{ch: make(chan func(), 1024), quit: make(chan struct{})}
	go func() {
		for {
			select {
			case fn := <-l.ch:
				l.inLoop = true
				fn()
				l.inLoop = false
			case <-l.quit:
				return
			}
		}
	}()
	t.Cleanup(l.close)
	return l
}

func (l *testLoop) Post(fn func()) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.posts++
	l.ch <- fn
	return nil
}

func (l *testLoop) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.quit)
	}
}

// burnSink keeps burn's result alive, so the compiler cannot drop the loop.
var burnSink atomic.Uint64

// burn does n steps of a dependent multiply-add chain: a fixed amount of
// CPU work (about 2 ns a step on this machine) that, unlike spin, does not
// depend on the clock's resolution. Under Wine the clock that time.Now reads
// (KUSER_SHARED_DATA's interrupt time) advances in steps of 3 to 10 ms, so
// spin(time.Microsecond) lasts milliseconds there.
func burn(n int) {
	x := burnSink.Load()
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	burnSink.Store(x)
}

// spin busy-waits for about d without blocking the thread.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}
