package proxy

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// logEvery is the interval at which a rateLog lets a line through.
const logEvery = time.Second

// rateLog lets one kind of log line through at most once per logEvery,
// from any loop, and says in the next line it lets through how many it
// held back. Under a burst of failures (every client of a full fd table)
// the log stays readable and its cost bounded.
type rateLog struct {
	next    atomic.Int64  // unix nanoseconds before which lines are dropped
	dropped atomic.Uint64 // lines dropped since the last one written
}

func (r *rateLog) log(l *slog.Logger, level slog.Level, msg string, args ...any) {
	now := time.Now().UnixNano()
	next := r.next.Load()
	if now < next || !r.next.CompareAndSwap(next, now+int64(logEvery)) {
		r.dropped.Add(1)
		return
	}
	if n := r.dropped.Swap(0); n > 0 {
		args = append(args, "suppressed", n)
	}
	l.Log(context.Background(), level, msg, args...)
}
