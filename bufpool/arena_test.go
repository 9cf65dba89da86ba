//go:build linux

package bufpool

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestArena(t *testing.T) {
	page := unix.Getpagesize()
	tests := []struct {
		bufSize, count int
	}{
		{1, 1},
		{100, 3},
		{4096, 16},
		{1000, 37},
		{64 << 10, 4},
	}
	for _, tt := range tests {
		a, err := NewArena(tt.bufSize, tt.count)
		if err != nil {
			t.Fatal(err)
		}
		if a.Count() != tt.count || a.BufSize() != tt.bufSize {
			t.Fatalf("Count/BufSize = %d/%d", a.Count(), a.BufSize())
		}
		if l := a.Len(); l%page != 0 || l < tt.bufSize*tt.count || l >= tt.bufSize*tt.count+page {
			t.Fatalf("mapping of %d bytes for %d x %d", l, tt.count, tt.bufSize)
		}
		// Fill every buffer with its own pattern, then check none bled
		// into another.
		for i := range a.Count() {
			b := a.Buf(i)
			if len(b) != tt.bufSize || cap(b) != tt.bufSize {
				t.Fatalf("Buf(%d): len %d cap %d", i, len(b), cap(b))
			}
			for j := range b {
				if b[j] != 0 {
					t.Fatalf("fresh arena not zeroed")
				}
				b[j] = byte(i*31 + j)
			}
		}
		for i := range a.Count() {
			for j, v := range a.Buf(i) {
				if v != byte(i*31+j) {
					t.Fatalf("%dx%d: Buf(%d)[%d] = %d, want %d", tt.count, tt.bufSize, i, j, v, byte(i*31+j))
				}
			}
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestArenaKernelWrites(t *testing.T) {
	// The kernel, not Go, fills the buffer: read(2) from a pipe.
	a, err := NewArena(256, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if _, err := unix.Write(fds[1], []byte("from the kernel")); err != nil {
		t.Fatal(err)
	}
	n, err := unix.Read(fds[0], a.Buf(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(a.Buf(1)[:n]); got != "from the kernel" {
		t.Fatalf("read %q", got)
	}
}

func TestNewArenaErrors(t *testing.T) {
	tests := []struct {
		bufSize, count int
	}{
		{0, 1},
		{1, 0},
		{-1, 4},
		{4096, -1},
		{1 << 40, 1 << 40},
	}
	for _, tt := range tests {
		if _, err := NewArena(tt.bufSize, tt.count); !errors.Is(err, ErrInvalidSize) {
			t.Errorf("NewArena(%d, %d): err = %v, want ErrInvalidSize", tt.bufSize, tt.count, err)
		}
	}
	// Too big for the address space, but not overflowing int: mmap fails.
	if _, err := NewArena(1<<40, 1<<20); !errors.Is(err, unix.ENOMEM) {
		t.Errorf("huge arena: err = %v, want ENOMEM", err)
	}
}

func TestArenaClose(t *testing.T) {
	a, err := NewArena(512, 8)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := a.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	tests := []struct {
		name, want string
		fn         func()
	}{
		{"after close", "after Close", func() { a.Buf(0) }},
		{"out of range", "out of range", func() {
			b, _ := NewArena(512, 8)
			defer b.Close()
			b.Buf(8)
		}},
		{"negative", "out of range", func() {
			b, _ := NewArena(512, 8)
			defer b.Close()
			b.Buf(-1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tt.want) {
					t.Fatalf("panic %q, want one mentioning %q", msg, tt.want)
				}
			}()
			tt.fn()
		})
	}
}
