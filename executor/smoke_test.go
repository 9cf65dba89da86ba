package executor

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestSmoke(t *testing.T) {
	p := NewPool(WithWorkers(4))
	var wg sync.WaitGroup
	const n = 100000
	wg.Add(n)
	for range n {
		if err := p.Spawn(wg.Done); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	f := Submit(p, context.Background(), func(ctx context.Context) (int, error) { return 42, nil })
	v, err := f.Wait(context.Background())
	if v != 42 || err != nil {
		t.Fatal(v, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", p.Stats())
}
