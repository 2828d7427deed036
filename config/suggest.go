// The suggestions: an unknown key or a bad name gets the closest known one
// ("did you mean"), by edit distance.

package config

import (
	"fmt"
	"strings"
)

// unknown reports an unknown key, suggesting the closest known one.
func (d *decoder) unknown(p pair, known []string, hint string) {
	msg := "unknown key"
	if s := suggest(p.key, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	} else if hint != "" {
		msg += " (" + hint + ")"
	} else {
		msg += " (known keys: " + strings.Join(known, ", ") + ")"
	}
	d.fail(p.path, p.k, "%s", msg)
}

// suggest returns the known word closest to s, or "" when none is close.
func suggest(s string, known []string) string {
	canon := func(x string) string {
		return strings.NewReplacer("_", "", "-", "", " ", "").Replace(strings.ToLower(x))
	}
	best, bestD := "", 3
	if len(s) < 5 {
		bestD = 2
	}
	for _, k := range known {
		if canon(k) == canon(s) {
			return k
		}
		if dist := editDistance(s, k, bestD); dist < bestD {
			best, bestD = k, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, or limit when it is
// at least limit.
func editDistance(a, b string, limit int) int {
	if len(a) > 64 || len(b) > 64 || abs(len(a)-len(b)) >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// enumMsg is the problem of a value that is not one of names, with a
// suggestion when one is close.
func enumMsg(got string, names []string) string {
	s := fmt.Sprintf("must be one of %s, got %q", orList(names), got)
	if sug := suggest(got, names); sug != "" {
		s += fmt.Sprintf(" (did you mean %q?)", sug)
	}
	return s
}
