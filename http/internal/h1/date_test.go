package h1

import (
	nethttp "net/http"
	"testing"
	"time"
)

func TestDateCache(t *testing.T) {
	var d DateCache
	times := []time.Time{
		time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC),
		time.Date(2024, 2, 29, 23, 59, 59, 999999999, time.UTC),
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.FixedZone("X", 5*3600+1800)),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Now(),
	}
	for _, tm := range times {
		got := string(d.Append(nil, tm))
		want := tm.UTC().Format(nethttp.TimeFormat)
		if got != want {
			t.Errorf("%v: got %q, want %q", tm, got, want)
		}
		parsed, err := time.Parse(nethttp.TimeFormat, got)
		if err != nil || !parsed.Equal(tm.Truncate(time.Second)) {
			t.Errorf("%v: time.Parse(%q) = %v, %v", tm, got, parsed, err)
		}
	}
	if got := string(d.Bytes(times[0])); got != "Sun, 06 Nov 1994 08:49:37 GMT" {
		t.Errorf("RFC example: %q", got)
	}
}

func TestDateCacheOncePerSecond(t *testing.T) {
	var d DateCache
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for i := 0; i < 1000; i++ {
		d.Bytes(base.Add(time.Duration(i) * time.Millisecond))
	}
	expect(t, "updates in one second", d.updates, 1)
	d.Bytes(base.Add(time.Second))
	expect(t, "updates after a second", d.updates, 2)
	// Going back in time also reformats.
	d.Bytes(base)
	expect(t, "updates after going back", d.updates, 3)
	allocs := testing.AllocsPerRun(100, func() {
		base = base.Add(time.Second)
		d.Bytes(base)
	})
	expect(t, "allocs", allocs, 0.0)
}

func BenchmarkDateCache(b *testing.B) {
	var d DateCache
	dst := make([]byte, 0, 64)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		dst = d.Append(dst[:0], now)
	}
}
