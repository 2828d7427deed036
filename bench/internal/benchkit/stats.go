package benchkit

import (
	"cmp"
	"slices"
)

// Percentile returns the p-quantile (0 ≤ p ≤ 1) of xs by nearest rank: the
// element at index round(p·(n−1)) of xs sorted, which it leaves as it is. p
// outside [0, 1] is taken as its nearest bound; an empty xs gives the zero
// value.
func Percentile[T cmp.Ordered](xs []T, p float64) T {
	if len(xs) == 0 {
		var zero T
		return zero
	}
	s := xs
	if !slices.IsSorted(s) {
		s = slices.Clone(xs)
		slices.Sort(s)
	}
	if !(p > 0) { // also NaN
		p = 0
	} else if p > 1 {
		p = 1
	}
	return s[int(p*float64(len(s)-1)+0.5)]
}
