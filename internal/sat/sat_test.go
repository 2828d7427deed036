package sat

import (
	"math"
	"math/big"
	"testing"
)

func TestAdd(t *testing.T) {
	for _, c := range []struct{ a, b, want uint64 }{
		{0, 0, 0},
		{1, 2, 3},
		{math.MaxUint64 - 11, 11, math.MaxUint64},
		{math.MaxUint64 - 11, 12, math.MaxUint64},
		{math.MaxUint64, math.MaxUint64, math.MaxUint64},
		{1 << 63, 1 << 63, math.MaxUint64},
	} {
		if got := Add(c.a, c.b); got != c.want {
			t.Errorf("Add(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestAdd64(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{1, 2, 3},
		{-1, -2, -3},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{math.MinInt64, -1, math.MinInt64},
		{math.MaxInt64, math.MinInt64, -1},
		{1 << 62, 1 << 62, math.MaxInt64},
	} {
		if got := Add64(c.a, c.b); got != c.want {
			t.Errorf("Add64(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestMul64(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{3, 4, 12},
		{0, 4, 0},
		{-3, 4, 0},
		{1 << 31, 1 << 31, 1 << 62},
		{1 << 32, 1 << 31, math.MaxInt64},
		{math.MaxInt64, 2, math.MaxInt64},
	} {
		if got := Mul64(c.a, c.b); got != c.want {
			t.Errorf("Mul64(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	if Int64(math.MaxUint64) != math.MaxInt64 || Int64(7) != 7 {
		t.Error("Int64 does not saturate")
	}
}

// FuzzAddNeverDecreases: any sequence of adds to a counter never makes it
// smaller, and it equals the exact sum capped at the ceiling.
func FuzzAddNeverDecreases(f *testing.F) {
	f.Add(uint64(1), uint64(math.MaxUint64-11), uint64(12), uint64(5))
	f.Add(uint64(1<<62), uint64(1<<62), uint64(1<<62), uint64(1<<62))
	f.Fuzz(func(t *testing.T, a, b, c, d uint64) {
		var n uint64
		exact := new(big.Int)
		ceil := new(big.Int).SetUint64(math.MaxUint64)
		for _, x := range []uint64{a, b, c, d} {
			next := Add(n, x)
			if next < n {
				t.Fatalf("%d + %d went down to %d", n, x, next)
			}
			n = next
			exact.Add(exact, new(big.Int).SetUint64(x))
			want := exact
			if exact.Cmp(ceil) > 0 {
				want = ceil
			}
			if want.Uint64() != n {
				t.Fatalf("after adding %d: %d, want %s", x, n, want)
			}
		}
	})
}

// FuzzAdd64 checks Add64 against exact arithmetic clamped to int64.
func FuzzAdd64(f *testing.F) {
	f.Add(int64(math.MaxInt64), int64(1))
	f.Add(int64(math.MinInt64), int64(-1))
	f.Fuzz(func(t *testing.T, a, b int64) {
		exact := new(big.Int).Add(big.NewInt(a), big.NewInt(b))
		switch {
		case exact.Cmp(big.NewInt(math.MaxInt64)) > 0:
			exact.SetInt64(math.MaxInt64)
		case exact.Cmp(big.NewInt(math.MinInt64)) < 0:
			exact.SetInt64(math.MinInt64)
		}
		if got := Add64(a, b); got != exact.Int64() {
			t.Fatalf("Add64(%d, %d) = %d, want %s", a, b, got, exact)
		}
		if b >= 0 && Add64(a, b) < a {
			t.Fatalf("adding %d to %d went down", b, a)
		}
	})
}

// FuzzMul64 checks Mul64 against exact arithmetic clamped to int64.
func FuzzMul64(f *testing.F) {
	f.Add(int64(1<<32), int64(1<<31))
	f.Fuzz(func(t *testing.T, a, b int64) {
		want := new(big.Int)
		if a > 0 && b > 0 {
			want.Mul(big.NewInt(a), big.NewInt(b))
			if want.Cmp(big.NewInt(math.MaxInt64)) > 0 {
				want.SetInt64(math.MaxInt64)
			}
		}
		if got := Mul64(a, b); got != want.Int64() {
			t.Fatalf("Mul64(%d, %d) = %d, want %s", a, b, got, want)
		}
	})
}
