package bufpool

import (
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// same reports whether a and b share their first byte of backing memory.
func same(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:1][0] == &b[:1][0]
}

func TestPoolGetShape(t *testing.T) {
	p := NewPool()
	tests := []struct {
		n, wantCap int
	}{
		{0, 512},
		{1, 512},
		{512, 512},
		{513, 1024},
		{4000, 4096},
		{MaxSize, MaxSize},
		{MaxSize + 1, MaxSize + 1},
	}
	for _, tt := range tests {
		b := p.Get(tt.n)
		if len(b) != tt.n || cap(b) != tt.wantCap {
			t.Errorf("Get(%d): len %d cap %d, want len %d cap %d", tt.n, len(b), cap(b), tt.n, tt.wantCap)
		}
		p.Put(b)
	}
}

func TestGetNegativePanics(t *testing.T) {
	for name, get := range map[string]func(int) []byte{
		"Pool":  NewPool().Get,
		"Cache": NewCache(NewPool(), 4).Get,
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("Get(-1) did not panic")
				}
			}()
			get(-1)
		})
	}
}

func TestPoolReuse(t *testing.T) {
	p := NewPool()
	// sync.Pool caches per P and, under the race detector, drops Puts at
	// random, so allow a few attempts on a pinned goroutine.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, n := range []int{1, 600, 64 << 10, MaxSize} {
		reused := false
		for range 50 {
			b := p.Get(n)
			b[0] = 0xab
			p.Put(b)
			b2 := p.Get(n)
			reused = same(b, b2)
			p.Put(b2)
			if reused {
				if len(b2) != n || cap(b2) != ClassSize(ClassOf(n)) {
					t.Fatalf("reused buffer has len %d cap %d", len(b2), cap(b2))
				}
				break
			}
		}
		if !reused {
			t.Errorf("Get(%d) never reused a Put buffer", n)
		}
	}
}

func TestPoolRejects(t *testing.T) {
	p := NewPool()
	big := make([]byte, 1000)
	tests := []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"small", make([]byte, 100)},
		{"not a power of two", make([]byte, 10, 1000)},
		{"resliced from the front", p.Get(2048)[1:]},
		{"oversize", make([]byte, 2*MaxSize)},
		{"oversize from Get", p.Get(MaxSize + 1)},
		{"sub-slice of foreign", big[:0:512][0:0]},
	}
	before := p.Stats()
	for _, tt := range tests {
		p.Put(tt.b)
	}
	st := p.Stats()
	// The last case has a class capacity (512), so it is kept: Put cannot
	// tell it from a pooled buffer, which is why Put transfers ownership.
	wantDrops := uint64(len(tests) - 1)
	if got := st.Drops - before.Drops; got != wantDrops {
		t.Errorf("Drops = %d, want %d", got, wantDrops)
	}
	if got := st.Bytes - before.Bytes; got != 512 {
		t.Errorf("Bytes grew by %d, want 512", got)
	}
}

func TestPoolStats(t *testing.T) {
	p := NewPool()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	a := p.Get(100)         // miss
	b := p.Get(5000)        // miss
	c := p.Get(MaxSize * 2) // miss, unpooled
	p.Put(a)
	p.Put(b)
	p.Put(c) // drop
	st := p.Stats()
	want := Stats{Gets: 3, Puts: 3, Hits: 0, Misses: 3, Drops: 1, Bytes: 512 + 8192}
	if st != want {
		t.Fatalf("Stats = %+v, want %+v", st, want)
	}
	// A hit (retry: sync.Pool may drop under -race or at GC).
	d := p.Get(100)
	st = p.Stats()
	if st.Gets != 4 || st.Hits+st.Misses != st.Gets {
		t.Fatalf("Stats after 4th Get = %+v", st)
	}
	if !raceEnabled && st.Hits != 1 {
		t.Errorf("Hits = %d, want 1", st.Hits)
	}
	if st.Hits == 1 && st.Bytes != 8192 {
		t.Errorf("Bytes = %d after hit, want 8192", st.Bytes)
	}
	p.Put(d)
}

// TestPoolConcurrent is meant for -race: many goroutines share one Pool,
// each writing a pattern into its buffers and checking that nobody else
// wrote into them while they owned them.
func TestPoolConcurrent(t *testing.T) {
	p := NewPool()
	const workers, iters = 8, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			held := make([][]byte, 0, 4)
			for i := range iters {
				n := (i*7919 + w*131) % (64 << 10)
				b := p.Get(n)
				if len(b) != n || cap(b) != ClassSize(ClassOf(n)) {
					t.Errorf("Get(%d): len %d cap %d", n, len(b), cap(b))
					return
				}
				b = b[:cap(b)]
				tag := byte(w + 1)
				b[0], b[len(b)-1] = tag, tag
				held = append(held, b)
				if len(held) == cap(held) {
					for _, h := range held {
						if h[0] != tag || h[len(h)-1] != tag {
							t.Errorf("buffer modified while owned")
						}
						p.Put(h)
					}
					held = held[:0]
				}
			}
			for _, h := range held {
				p.Put(h)
			}
		})
	}
	wg.Wait()
	st := p.Stats()
	if st.Gets != workers*iters || st.Puts != workers*iters || st.Hits+st.Misses != st.Gets {
		t.Fatalf("Stats = %+v", st)
	}
}

func TestPoolAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops Puts at random under the race detector")
	}
	p := NewPool()
	p.Put(p.Get(1000))
	if a := testing.AllocsPerRun(1000, func() { p.Put(p.Get(1000)) }); a != 0 {
		t.Errorf("Pool Get/Put: %v allocs per run, want 0", a)
	}
}

func BenchmarkPoolGetPut(b *testing.B) {
	for _, n := range []int{512, 16 << 10, MaxSize} {
		b.Run(sizeName(n), func(b *testing.B) {
			p := NewPool()
			p.Put(p.Get(n))
			b.ReportAllocs()
			for b.Loop() {
				p.Put(p.Get(n))
			}
		})
	}
}

func BenchmarkPoolGetPutParallel(b *testing.B) {
	p := NewPool()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p.Put(p.Get(4096))
		}
	})
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1<<10:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}
