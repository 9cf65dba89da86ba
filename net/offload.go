package net

import (
	"context"
	"fmt"

	"github.com/veloq/veloq/executor"
)

// Offload runs work on the stealable pool p, off the loop, and then runs
// then on c's loop with the result. Its arguments come in the order of
// executor.Submit (context, pool, work), with the connection before the
// work. If c closed in the meantime, then still runs (so the handler can
// release what it holds) with an error wrapping ErrClosed (the standard
// library's net.ErrClosed), and must not expect writes to reach anyone.
//
// Order is kept: from the call until then runs, the connection's input is
// held (HoldData). No more OnData runs, and inside the current OnData the
// input not yet consumed is hidden, so a handler that goes on parsing
// after Offload finds nothing more and cannot answer a later request
// before this one; the rest is presented after then has run. Reading goes
// on meanwhile, so a reset is noticed. work must not touch c: it runs on
// another goroutine.
func Offload[T any](ctx context.Context, p *executor.Pool, c *Conn, work func(context.Context) (T, error), then func(c *Conn, v T, err error)) {
	c.HoldData()
	f := executor.Submit(ctx, p, work)
	f.OnLoop(c.Loop(), resume(c, then))
}

// OffloadBlocking is Offload on the blocking pool, for work that blocks in
// system calls. A full blocking pool makes then see executor.ErrOverloaded.
func OffloadBlocking[T any](ctx context.Context, p *executor.BlockingPool, c *Conn, work func(context.Context) (T, error), then func(c *Conn, v T, err error)) {
	c.HoldData()
	f := executor.SubmitBlocking(ctx, p, work)
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
