package net

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// The heap pops in deadline order whatever the insertion order, and Stop
// removes exactly the stopped timers.
func TestTimerHeapOrderAndStop(t *testing.T) {
	l := &Loop{}
	rng := rand.New(rand.NewPCG(1, 2))
	var all []*Timer
	for i := 0; i < 500; i++ {
		tm := &Timer{when: rng.Int64N(1000), loop: l}
		l.timers.push(tm)
		all = append(all, tm)
	}
	stopped := map[*Timer]bool{}
	for i := 0; i < 100; i++ {
		tm := all[rng.IntN(len(all))]
		if tm.Stop() {
			stopped[tm] = true
		}
		if tm.Pending() {
			t.Fatal("stopped timer still pending")
		}
	}
	var got []int64
	for len(l.timers) > 0 {
		tm := l.timers[0]
		l.timers.remove(0)
		if stopped[tm] {
			t.Fatal("stopped timer popped")
		}
		got = append(got, tm.when)
	}
	if len(got) != 500-len(stopped) {
		t.Fatalf("popped %d timers, want %d", len(got), 500-len(stopped))
	}
	if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i] < got[j] }) {
		t.Fatal("timers popped out of order")
	}
}

func TestTokenRoundTrip(t *testing.T) {
	tests := []struct {
		op        uint64
		slot, gen uint32
	}{
		{opRecv, 0, 0}, {opSend, 1<<32 - 1, 0xffffff}, {opAccept, 7, 1 << 24}, {opWake, 0, 0},
	}
	for _, tt := range tests {
		op, slot, gen := untoken(token(tt.op, tt.slot, tt.gen))
		if op != tt.op || slot != tt.slot || gen != tt.gen&0xffffff {
			t.Errorf("token(%d,%d,%d) -> %d,%d,%d", tt.op, tt.slot, tt.gen, op, slot, gen)
		}
	}
}

func TestParseBackend(t *testing.T) {
	for _, s := range []string{"auto", "uring", "epoll", ""} {
		if _, err := ParseBackend(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	if _, err := ParseBackend("kqueue"); err == nil {
		t.Error("kqueue accepted")
	}
}
