package mpsc

import (
	"sync"
	"testing"
)

func TestFIFOSingleProducer(t *testing.T) {
	q := New[int]()
	if !q.Empty() {
		t.Fatal("new queue not empty")
	}
	for i := 0; i < 1000; i++ {
		q.Push(i)
	}
	for i := 0; i < 1000; i++ {
		v, ok := q.Pop()
		if !ok || v != i {
			t.Fatalf("pop %d: got %d, %v", i, v, ok)
		}
	}
	if _, ok := q.Pop(); ok || !q.Empty() {
		t.Fatal("queue should be empty")
	}
}

// Many producers: every item arrives exactly once and each producer's items
// arrive in the order it pushed them.
func TestManyProducersPerProducerOrder(t *testing.T) {
	const producers, per = 16, 20000
	q := New[[2]int]()
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				q.Push([2]int{p, i})
			}
		}(p)
	}
	next := make([]int, producers)
	got := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for got < producers*per {
		v, ok := q.Pop()
		if !ok {
			select {
			case <-done:
				if q.Empty() {
					t.Fatalf("lost items: got %d of %d", got, producers*per)
				}
			default:
			}
			continue
		}
		if v[1] != next[v[0]] {
			t.Fatalf("producer %d: got item %d, want %d", v[0], v[1], next[v[0]])
		}
		next[v[0]]++
		got++
	}
	if q.Len() != 0 {
		t.Fatalf("Len = %d after draining", q.Len())
	}
}

func BenchmarkPushPop(b *testing.B) {
	q := New[int]()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		q.Push(i)
		q.Pop()
	}
}
