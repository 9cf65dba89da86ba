//go:build linux

// Linux only: io_uring is a Linux interface.

package uring

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkNop measures one NOP submitted and reaped, in batches: GetSQE +
// PrepNop per op, one SubmitAndWait + PeekBatchCQE + CQAdvance per batch.
func BenchmarkNop(b *testing.B) {
	for _, batch := range []int{1, 32, 256} {
		for _, v := range []struct {
			name string
			opts []Option
		}{
			{"default", nil},
			{"defer_taskrun", []Option{WithDeferTaskrun()}},
		} {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, v.name), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				r := newRing(b, uint32(batch), v.opts...)
				cqes := make([]*CQE, batch)
				b.ReportAllocs()
				b.ResetTimer()
				for done := 0; done < b.N; {
					n := min(batch, b.N-done)
					for i := 0; i < n; i++ {
						s := r.GetSQE()
						s.PrepNop()
						s.SetUserData(uint64(i))
					}
					if _, err := r.SubmitAndWait(uint32(n)); err != nil {
						b.Fatal(err)
					}
					for got := 0; got < n; {
						k := r.PeekBatchCQE(cqes)
						for _, c := range cqes[:k] {
							if c.Res != 0 {
								b.Fatal(c.Err())
							}
						}
						r.CQAdvance(uint32(k))
						got += k
					}
					done += n
				}
			})
		}
	}
}

// BenchmarkPeekEmpty is the reactor's "anything ready?" check on an idle ring.
func BenchmarkPeekEmpty(b *testing.B) {
	r := newRing(b, 8)
	cqes := make([]*CQE, 64)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if r.PeekBatchCQE(cqes) != 0 {
			b.Fatal("unexpected CQE")
		}
	}
}
