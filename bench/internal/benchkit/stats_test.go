package benchkit

import (
	"math"
	"slices"
	"testing"
)

func TestPercentile(t *testing.T) {
	xs := []int{50, 10, 40, 20, 30}
	orig := slices.Clone(xs)
	for _, tc := range []struct {
		p    float64
		want int
	}{{0, 10}, {0.05, 10}, {0.125, 20}, {0.5, 30}, {0.95, 50}, {1, 50}, {-1, 10}, {2, 50}, {math.NaN(), 10}} {
		if got := Percentile(xs, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", xs, tc.p, got, tc.want)
		}
	}
	if !slices.Equal(xs, orig) {
		t.Errorf("Percentile sorted its argument: %v", xs)
	}
	if got := Percentile([]float64{}, 0.5); got != 0 {
		t.Errorf("empty: %v", got)
	}
	if got := Percentile([]float64{0.1, 0.2, 0.3, 0.4}, 0.9); got != 0.4 {
		t.Errorf("sorted floats, p 0.9: %v", got)
	}
}
