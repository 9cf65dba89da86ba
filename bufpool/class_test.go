package bufpool

import "testing"

func TestClassOf(t *testing.T) {
	tests := []struct {
		n, want int
	}{
		{-1, -1},
		{0, 0},
		{1, 0},
		{MinSize - 1, 0},
		{MinSize, 0},
		{MinSize + 1, 1},
		{1023, 1},
		{1024, 1},
		{1025, 2},
		{4096, 3},
		{4097, 4},
		{MaxSize/2 + 1, NumClasses - 1},
		{MaxSize - 1, NumClasses - 1},
		{MaxSize, NumClasses - 1},
		{MaxSize + 1, -1},
		{1 << 40, -1},
	}
	for _, tt := range tests {
		if got := ClassOf(tt.n); got != tt.want {
			t.Errorf("ClassOf(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}

func TestClassSize(t *testing.T) {
	tests := []struct {
		c, want int
	}{
		{-1, 0},
		{0, 512},
		{1, 1024},
		{2, 2048},
		{NumClasses - 1, MaxSize},
		{NumClasses, 0},
	}
	for _, tt := range tests {
		if got := ClassSize(tt.c); got != tt.want {
			t.Errorf("ClassSize(%d) = %d, want %d", tt.c, got, tt.want)
		}
	}
}

// TestClassConsistency checks, for every size up to MaxSize+1, that the
// class found is the smallest that fits and that class sizes map back.
func TestClassConsistency(t *testing.T) {
	for n := 0; n <= MaxSize+1; n++ {
		c := ClassOf(n)
		if n > MaxSize {
			if c != -1 {
				t.Fatalf("ClassOf(%d) = %d, want -1", n, c)
			}
			continue
		}
		if ClassSize(c) < n || (c > 0 && ClassSize(c-1) >= n) {
			t.Fatalf("ClassOf(%d) = %d (size %d) is not the smallest fit", n, c, ClassSize(c))
		}
	}
	for c := range NumClasses {
		if got := classOfCap(ClassSize(c)); got != c {
			t.Errorf("classOfCap(%d) = %d, want %d", ClassSize(c), got, c)
		}
	}
	if NumClasses != ClassOf(MaxSize)+1 {
		t.Errorf("NumClasses = %d, want %d", NumClasses, ClassOf(MaxSize)+1)
	}
}

func TestClassOfCapForeign(t *testing.T) {
	for _, c := range []int{0, 1, 256, 511, 513, 1000, 1536, 3 << 10, MaxSize - 1, MaxSize + 1, 2 * MaxSize} {
		if got := classOfCap(c); got != -1 {
			t.Errorf("classOfCap(%d) = %d, want -1", c, got)
		}
	}
}
