package net

import (
	"context"
	"fmt"

	"github.com/veloq/veloq/executor"
)

// Offload runs work on the stealable pool p, off the loop, and then runs
// then on c's loop with the result. If c closed in the meantime, then still
// runs (so the handler can release what it holds) with an error wrapping
// ErrClosed, and must not expect writes to reach anyone.
//
// OnData is held (HoldData) while the work runs and released before then
// is called, so the connection's requests are answered in order; reading
// goes on meanwhile, so a reset is noticed. work must not touch c: it runs
// on another goroutine.
func Offload[T any](ctx context.Context, c *Conn, p *executor.Pool, work func(context.Context) (T, error), then func(c *Conn, v T, err error)) {
	c.HoldData()
	f := executor.Submit(p, ctx, work)
	f.OnLoop(c.Loop(), resume(c, then))
}

// OffloadBlocking is Offload on the blocking pool, for work that blocks in
// system calls. A full blocking pool makes then see executor.ErrOverloaded.
func OffloadBlocking[T any](ctx context.Context, c *Conn, p *executor.BlockingPool, work func(context.Context) (T, error), then func(c *Conn, v T, err error)) {
	c.HoldData()
	f := executor.SubmitBlocking(p, ctx, work)
	f.OnLoop(c.Loop(), resume(c, then))
}

func resume[T any](c *Conn, then func(*Conn, T, error)) func(T, error) {
	return func(v T, err error) {
		if c.Closed() {
			if err == nil {
				err = ErrClosed
			} else {
				err = fmt.Errorf("%w (and the task failed: %w)", ErrClosed, err)
			}
			then(c, v, err)
			return
		}
		c.ReleaseData()
		then(c, v, err)
	}
}
