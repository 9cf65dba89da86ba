package executor

import (
	"log/slog"
	"runtime"
	"time"
)

// config holds the settings of a Pool.
type config struct {
	workers  int
	budget   int
	logger   *slog.Logger
	stealing bool
}

// Option configures a Pool.
type Option func(*config)

// WithWorkers sets the number of workers. Values below 1 select the default,
// runtime.GOMAXPROCS(0).
func WithWorkers(n int) Option {
	return func(c *config) { c.workers = n }
}

// WithLogger sets the logger used to report recovered panics. The default is
// slog.Default() at the time the pool is created.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithTaskBudget sets how many tasks a worker runs in one round before it
// yields its thread to other goroutines with runtime.Gosched. Values below
// 1 select the default, 64.
func WithTaskBudget(n int) Option {
	return func(c *config) { c.budget = n }
}

// WithStealing turns work stealing on or off; it is on by default. With
// stealing off, a task stays with the worker it was placed on: a Spawn from
// outside the pool goes to the less loaded of two random workers (as with
// stealing on) and waits there, Worker.Spawn keeps the task on that worker's
// own deque, and an idle worker never takes tasks from another worker's
// queues; it parks instead. Only the pool's shared overflow queue (the
// injector, which receives the older half of a full queue) is still drained
// by any worker. This is the baseline that shows what stealing buys when task
// costs are uneven: a long task then delays every task queued behind it on
// its worker.
func WithStealing(on bool) Option {
	return func(c *config) { c.stealing = on }
}

func newConfig(opts []Option) config {
	c := config{stealing: true}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.workers < 1 {
		c.workers = runtime.GOMAXPROCS(0)
	}
	if c.budget < 1 {
		c.budget = 64
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return c
}

// blockingConfig holds the settings of a BlockingPool.
type blockingConfig struct {
	maxGoroutines int
	queueSize     int
	idleTimeout   time.Duration
	logger        *slog.Logger
}

// BlockingOption configures a BlockingPool.
type BlockingOption func(*blockingConfig)

// WithMaxGoroutines bounds the number of goroutines of a BlockingPool. They
// are plain goroutines, not locked to OS threads; a task that blocks in a
// system call still holds a thread, so the bound also caps the threads the
// pool can pin. Values below 1 select the default, 64.
func WithMaxGoroutines(n int) BlockingOption {
	return func(c *blockingConfig) { c.maxGoroutines = n }
}

// WithQueueSize bounds the number of tasks that wait for a goroutine when all
// are busy. Zero selects the default, 1024, as zero does in every other
// option; a negative n means no queue: a task is accepted only if a
// goroutine can take it at once (as a negative net.Dialer.KeepAlive, or
// veloq's negative timeouts, turn the feature off).
func WithQueueSize(n int) BlockingOption {
	return func(c *blockingConfig) { c.queueSize = n }
}

// WithGoroutineIdleTimeout sets how long an idle goroutine of a BlockingPool
// waits for work before it exits. Values of zero or below select the
// default, 10s.
func WithGoroutineIdleTimeout(d time.Duration) BlockingOption {
	return func(c *blockingConfig) { c.idleTimeout = d }
}

// WithBlockingLogger sets the logger used to report recovered panics. The
// default is slog.Default() at the time the pool is created.
func WithBlockingLogger(l *slog.Logger) BlockingOption {
	return func(c *blockingConfig) { c.logger = l }
}

func newBlockingConfig(opts []BlockingOption) blockingConfig {
	var c blockingConfig
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.maxGoroutines < 1 {
		c.maxGoroutines = 64
	}
	switch {
	case c.queueSize == 0:
		c.queueSize = 1024
	case c.queueSize < 0:
		c.queueSize = 0 // no queue
	}
	if c.idleTimeout <= 0 {
		c.idleTimeout = 10 * time.Second
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return c
}
