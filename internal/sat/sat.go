package sat

import (
	"math"
	"math/bits"
)

// Add returns a + b, or math.MaxUint64 when the sum does not fit.
func Add(a, b uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	if c != 0 {
		return math.MaxUint64
	}
	return s
}

// Add64 returns a + b, or math.MaxInt64 (math.MinInt64) when the sum
// overflows upward (downward).
func Add64(a, b int64) int64 {
	s := a + b
	// Overflow iff a and b have the same sign and s's differs.
	if (a >= 0) == (b >= 0) && (s >= 0) != (a >= 0) {
		if a >= 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// Mul64 returns a × b for a, b ≥ 0, or math.MaxInt64 when the product does
// not fit; a negative operand gives 0.
func Mul64(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

// Int64 returns u as an int64, math.MaxInt64 when it is larger.
func Int64(u uint64) int64 {
	if u > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(u)
}
