package bufpool

import (
	"runtime"
	"testing"
)

func TestCacheReuseLIFO(t *testing.T) {
	c := NewCache(NewPool(), 4)
	a, b := c.Get(700), c.Get(700)
	c.Put(a)
	c.Put(b)
	if got := c.Get(1000); !same(got, b) || len(got) != 1000 || cap(got) != 1024 {
		t.Fatalf("first Get after Puts did not return the last Put buffer")
	}
	if got := c.Get(513); !same(got, a) || len(got) != 513 {
		t.Fatalf("second Get did not return the first Put buffer")
	}
}

func TestCacheBounded(t *testing.T) {
	const perClass = 3
	tests := []struct {
		name   string
		shared *Pool
	}{
		{"with shared", NewPool()},
		{"without shared", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c := NewCache(tt.shared, perClass)
			bufs := make([][]byte, 10)
			for i := range bufs {
				bufs[i] = c.Get(2048)
			}
			for _, b := range bufs {
				c.Put(b)
			}
			if got := c.Len(ClassOf(2048)); got != perClass {
				t.Fatalf("cache holds %d buffers, want %d", got, perClass)
			}
			st := c.Stats()
			want := Stats{Gets: 10, Puts: 10, Misses: 10, Drops: 10 - perClass, Bytes: perClass * 2048}
			if st != want {
				t.Fatalf("cache Stats = %+v, want %+v", st, want)
			}
			if tt.shared == nil {
				return
			}
			sst := tt.shared.Stats()
			if sst.Gets != 10 || sst.Puts != 10-perClass {
				t.Fatalf("shared Stats = %+v, want 10 Gets and %d Puts", sst, 10-perClass)
			}
			if sst.Bytes != (10-perClass)*2048 {
				t.Fatalf("shared Bytes = %d, want %d", sst.Bytes, (10-perClass)*2048)
			}
			// Drain the cache, then one more Get underflows to the shared
			// pool, which holds the overflow.
			for range perClass {
				c.Get(2048)
			}
			c.Get(2048)
			if got := tt.shared.Stats().Gets; got != 11 {
				t.Fatalf("underflow did not reach the shared pool: %d Gets", got)
			}
		})
	}
}

func TestCacheStats(t *testing.T) {
	c := NewCache(NewPool(), 2)
	steps := []struct {
		name string
		op   func()
		want Stats
	}{
		{"miss", func() { c.Put(c.Get(10)) }, Stats{Gets: 1, Puts: 1, Misses: 1, Bytes: 512}},
		{"hit", func() { c.Put(c.Get(10)) }, Stats{Gets: 2, Puts: 2, Hits: 1, Misses: 1, Bytes: 512}},
		{"foreign", func() { c.Put(make([]byte, 700)) }, Stats{Gets: 2, Puts: 3, Hits: 1, Misses: 1, Drops: 1, Bytes: 512}},
		{"oversize", func() { c.Put(c.Get(MaxSize + 1)) }, Stats{Gets: 3, Puts: 4, Hits: 1, Misses: 2, Drops: 2, Bytes: 512}},
		{"hold", func() { c.Get(10) }, Stats{Gets: 4, Puts: 4, Hits: 2, Misses: 2, Drops: 2, Bytes: 0}},
		{"flush", func() { c.Put(c.Get(MaxSize)); c.Flush() }, Stats{Gets: 5, Puts: 5, Hits: 2, Misses: 3, Drops: 2, Bytes: 0}},
	}
	for _, s := range steps {
		s.op()
		if got := c.Stats(); got != s.want {
			t.Fatalf("after %s: Stats = %+v, want %+v", s.name, got, s.want)
		}
	}
	for cl := range NumClasses {
		if c.Len(cl) != 0 {
			t.Fatalf("class %d not empty after Flush", cl)
		}
	}
}

func TestCacheZeroPerClass(t *testing.T) {
	shared := NewPool()
	c := NewCache(shared, 0)
	c.Put(c.Get(100))
	if st := c.Stats(); st.Drops != 1 || st.Bytes != 0 {
		t.Fatalf("Stats = %+v", st)
	}
	if st := shared.Stats(); st.Gets != 1 || st.Puts != 1 {
		t.Fatalf("shared Stats = %+v", st)
	}
}

func TestCacheAllocs(t *testing.T) {
	c := NewCache(NewPool(), 8)
	c.Put(c.Get(1000))
	if a := testing.AllocsPerRun(1000, func() { c.Put(c.Get(1000)) }); a != 0 {
		t.Errorf("Cache Get/Put: %v allocs per run, want 0", a)
	}
}

func BenchmarkCacheGetPut(b *testing.B) {
	for _, n := range []int{512, 16 << 10, MaxSize} {
		b.Run(sizeName(n), func(b *testing.B) {
			c := NewCache(NewPool(), 64)
			c.Put(c.Get(n))
			b.ReportAllocs()
			for b.Loop() {
				c.Put(c.Get(n))
			}
		})
	}
}

// BenchmarkCacheBurst gets and puts more buffers than the cache holds, so
// half of them overflow to and underflow from the shared pool.
func BenchmarkCacheBurst(b *testing.B) {
	const perClass, burst = 16, 32
	c := NewCache(NewPool(), perClass)
	held := make([][]byte, burst)
	b.ReportAllocs()
	for b.Loop() {
		for i := range held {
			held[i] = c.Get(4096)
		}
		for _, h := range held {
			c.Put(h)
		}
	}
}

// TestCacheMaxBytes: past the byte budget, Put hands buffers to the shared
// pool instead of keeping them, and Get takes them back from there.
func TestCacheMaxBytes(t *testing.T) {
	shared := NewPool()
	c := NewCache(shared, 64)
	c.SetMaxBytes(64 << 10)
	for range 8 {
		c.Put(make([]byte, 16<<10))
	}
	if got := c.Stats().Bytes; got != 64<<10 {
		t.Fatalf("cache keeps %d bytes, want the 64 KiB budget", got)
	}
	if got := c.Len(ClassOf(16 << 10)); got != 4 {
		t.Fatalf("cache keeps %d buffers of 16 KiB, want 4", got)
	}
	if got := shared.Stats().Puts; got != 4 {
		t.Fatalf("shared pool got %d buffers, want the 4 over budget", got)
	}
}
