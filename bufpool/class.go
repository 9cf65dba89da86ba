package bufpool

import "math/bits"

// Size classes: MinSize << c for c in [0, NumClasses).
const (
	MinSize    = 512     // smallest class, bytes
	MaxSize    = 1 << 20 // largest class, bytes
	NumClasses = 12      // MinSize, 2*MinSize, ..., MaxSize

	minShift = 9 // log2(MinSize)
)

// ClassOf returns the index of the smallest size class that holds n bytes,
// or -1 if n is negative or larger than MaxSize. Sizes 0 through MinSize
// map to class 0.
func ClassOf(n int) int {
	switch {
	case n < 0 || n > MaxSize:
		return -1
	case n <= MinSize:
		return 0
	}
	// For n in (2^(k-1), 2^k], n-1 has bit length k, so the class is k-9.
	return bits.Len(uint(n-1)) - minShift
}

// ClassSize returns the size in bytes of class c, or 0 if c is not a valid
// class index.
func ClassSize(c int) int {
	if c < 0 || c >= NumClasses {
		return 0
	}
	return MinSize << c
}

// classOfCap returns the class whose size is exactly c, or -1 when c is not
// a class size (a foreign or resliced buffer).
func classOfCap(c int) int {
	if c < MinSize || c > MaxSize || c&(c-1) != 0 {
		return -1
	}
	return bits.TrailingZeros(uint(c)) - minShift
}
