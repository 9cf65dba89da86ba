package executor

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		name                  string
		opts                  []Option
		wantWorkers, wantBudg int
	}{
		{"defaults", nil, runtime.GOMAXPROCS(0), 64},
		{"explicit", []Option{WithWorkers(3), WithTaskBudget(8)}, 3, 8},
		{"invalid falls back", []Option{WithWorkers(0), WithTaskBudget(-1), nil}, runtime.GOMAXPROCS(0), 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newConfig(tt.opts)
			if c.workers != tt.wantWorkers || c.budget != tt.wantBudg || c.logger == nil || !c.stealing {
				t.Fatalf("config = %+v, want workers %d budget %d, a logger and stealing on", c, tt.wantWorkers, tt.wantBudg)
			}
		})
	}
}

func TestWithStealing(t *testing.T) {
	if c := newConfig([]Option{WithStealing(false)}); c.stealing {
		t.Error("WithStealing(false) left stealing on")
	}
	if c := newConfig([]Option{WithStealing(false), WithStealing(true)}); !c.stealing {
		t.Error("the last WithStealing does not win")
	}
}

func TestBlockingConfigDefaults(t *testing.T) {
	tests := []struct {
		name       string
		opts       []BlockingOption
		goroutines int
		queue      int
		idle       time.Duration
	}{
		{"defaults", nil, 64, 1024, 10 * time.Second},
		{"explicit", []BlockingOption{WithMaxGoroutines(4), WithQueueSize(16), WithGoroutineIdleTimeout(time.Second)}, 4, 16, time.Second},
		{"no queue", []BlockingOption{WithQueueSize(-1)}, 64, 0, 10 * time.Second},
		{"zero is the default", []BlockingOption{WithMaxGoroutines(0), WithQueueSize(0), WithGoroutineIdleTimeout(0)}, 64, 1024, 10 * time.Second},
		{"invalid falls back", []BlockingOption{WithMaxGoroutines(-2), WithGoroutineIdleTimeout(-1)}, 64, 1024, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newBlockingConfig(tt.opts)
			if c.maxGoroutines != tt.goroutines || c.queueSize != tt.queue || c.idleTimeout != tt.idle || c.logger == nil {
				t.Fatalf("config = %+v", c)
			}
		})
	}
}

// TestSmallBudget runs with a budget of 1, so every task ends a round.
func TestSmallBudget(t *testing.T) {
	p := NewPool(WithWorkers(2), WithTaskBudget(1))
	defer shutdown(t, p)
	var wg sync.WaitGroup
	wg.Add(1000)
	for i := range 1000 {
		if i%2 == 0 {
			mustNil(t, p.Spawn(wg.Done))
		} else {
			mustNil(t, p.SpawnTo(i%2, wg.Done))
		}
	}
	waitGroup(t, &wg, "tasks")
}

func TestPanicErrorText(t *testing.T) {
	err := error(&PanicError{Value: "boom"})
	if !strings.Contains(err.Error(), "boom") || !errors.Is(err, ErrPanicked) {
		t.Fatalf("PanicError = %q", err)
	}
}

func TestSubmitContextValues(t *testing.T) {
	p := NewPool(WithWorkers(1))
	defer shutdown(t, p)
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	f := Submit(ctx, p, func(ctx context.Context) (any, error) { return ctx.Value(key{}), nil })
	if v, err := f.Wait(context.Background()); v != "v" || err != nil {
		t.Fatalf("value through the worker context = %v, %v", v, err)
	}
}
