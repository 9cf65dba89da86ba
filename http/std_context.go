package http

import (
	"context"
	"sync"
)

// reqContext is a FromStd request's context, part of its exchange so that
// it costs no allocation of its own (context.WithCancel costs two). Values
// and the absent deadline come from the connection's base context, which
// is never canceled; Done's channel is made only if someone asks for it.
// It implements AfterFunc, which the context package uses to propagate
// cancellation to derived contexts without a goroutine each.
type reqContext struct {
	context.Context
	mu     sync.Mutex
	done   chan struct{}
	err    error
	afters map[*afterFn]struct{}
}

type afterFn struct{ f func() }

// Done implements context.Context.
func (c *reqContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

// Err implements context.Context.
func (c *reqContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc arranges for f to run in its own goroutine once c is
// canceled (at once if it is), like context.AfterFunc; stop unregisters f
// and reports whether it did so before f was started.
func (c *reqContext) AfterFunc(f func()) (stop func() bool) {
	a := &afterFn{f: f}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	if c.afters == nil {
		c.afters = make(map[*afterFn]struct{})
	}
	c.afters[a] = struct{}{}
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.afters[a]; !ok {
			return false
		}
		delete(c.afters, a)
		return true
	}
}

func (c *reqContext) cancel() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	if c.done != nil {
		close(c.done)
	}
	afters := c.afters
	c.afters = nil
	c.mu.Unlock()
	for a := range afters {
		go a.f()
	}
}

// String makes the context print as a request context.
func (c *reqContext) String() string { return "veloq/http.FromStd request context" }
