package topk

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// counters returns s's counters as "key=count/err", sorted by key.
func counters(s *summary) []string {
	var out []string
	for _, e := range s.ord {
		out = append(out, fmt.Sprintf("%s=%d/%d", e.key, e.count, e.err))
	}
	slices.Sort(out)
	return out
}

// checkOrder fails unless s's counters are in ord by count, the largest
// first, with positions, groups and index that agree: each group is the
// whole run of one count, and the free groups are the ones no counter is
// in.
func checkOrder(t testing.TB, s *summary) {
	t.Helper()
	used := map[int32]bool{}
	for i, e := range s.ord {
		if int(e.pos) != i {
			t.Fatalf("ord[%d].pos = %d", i, e.pos)
		}
		if i > 0 && s.ord[i-1].count < e.count {
			t.Fatalf("ord[%d] = %d after %d", i, e.count, s.ord[i-1].count)
		}
		g := s.groups[e.grp]
		if int(g.first) > i || int(g.last) < i {
			t.Fatalf("ord[%d] in group %d of [%d, %d]", i, e.grp, g.first, g.last)
		}
		if (i == int(g.first)) != (i == 0 || s.ord[i-1].count != e.count) {
			t.Fatalf("ord[%d] (count %d): group %d begins at %d", i, e.count, e.grp, g.first)
		}
		if (i == int(g.last)) != (i == len(s.ord)-1 || s.ord[i+1].count != e.count) {
			t.Fatalf("ord[%d] (count %d): group %d ends at %d", i, e.count, e.grp, g.last)
		}
		used[e.grp] = true
		if s.lookup(e.key) != e {
			t.Fatalf("index[%q] is not ord[%d]", e.key, i)
		}
	}
	free := 0
	for g := s.free; g >= 0; g = s.groups[g].first {
		if used[g] {
			t.Fatalf("group %d is both free and in use", g)
		}
		if free++; free > len(s.groups) {
			t.Fatalf("the free groups loop")
		}
	}
	if len(used)+free != len(s.groups) {
		t.Fatalf("%d groups in use and %d free of %d", len(used), free, len(s.groups))
	}
	if n := indexed(s); n != len(s.ord) {
		t.Fatalf("index has %d keys, ord %d", n, len(s.ord))
	}
}

func TestSummary(t *testing.T) {
	tests := []struct {
		name string
		cap  int
		adds string // keys, space-separated
		want []string
		min  uint64
	}{
		{name: "empty", cap: 2, adds: "", want: nil, min: 0},
		{name: "room: exact counts", cap: 3, adds: "a b a c a", want: []string{"a=3/0", "b=1/0", "c=1/0"}, min: 1},
		{name: "not full: min is 0", cap: 3, adds: "a a", want: []string{"a=2/0"}, min: 0},
		{name: "full: a new key takes the smallest counter", cap: 2, adds: "a a b c", want: []string{"a=2/0", "c=2/1"}, min: 2},
		{name: "the taken-over count is the error", cap: 2, adds: "a a a b b c d", want: []string{"a=3/0", "d=4/3"}, min: 3},
		{name: "cap 1 counts everything in one counter", cap: 1, adds: "a b c", want: []string{"c=3/2"}, min: 3},
		{name: "a heavy key survives a stream of new ones", cap: 2, adds: "h h h h x y z h", want: []string{"h=5/0", "z=3/2"}, min: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &summary{cap: tc.cap}
			for k := range strings.FieldsSeq(tc.adds) {
				s.add([]byte(k))
				checkOrder(t, s)
			}
			if got := counters(s); !slices.Equal(got, tc.want) {
				t.Errorf("counters %v, want %v", got, tc.want)
			}
			if got := s.min(); got != tc.min {
				t.Errorf("min %d, want %d", got, tc.min)
			}
			if got, want := s.n, uint64(len(strings.Fields(tc.adds))); got != want {
				t.Errorf("n %d, want %d", got, want)
			}
		})
	}
}

func TestSummaryReset(t *testing.T) {
	s := &summary{cap: 2}
	for _, k := range []string{"a", "b", "c"} {
		s.add([]byte(k))
	}
	s.reset()
	if s.n != 0 || len(s.ord) != 0 || indexed(s) != 0 || len(s.slab) != 0 || s.min() != 0 {
		t.Fatalf("after reset: n %d ord %d index %d slab %d", s.n, len(s.ord), indexed(s), len(s.slab))
	}
	s.add([]byte("d"))
	if got := counters(s); !slices.Equal(got, []string{"d=1/0"}) {
		t.Errorf("after reset and an add: %v", got)
	}
	checkOrder(t, s)
}

// TestSummaryRandom adds skewed random streams to small summaries and
// checks, after every add, the order and groups, and Space-Saving's
// guarantees against exact counts: the counts sum to the adds, every held
// key's count is at least its true count and at most err above it, and
// every key whose true count exceeds n/cap is held.
func TestSummaryRandom(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		capacity := 1 + rng.IntN(12)
		keys := 1 + rng.IntN(40)
		s := &summary{cap: capacity}
		truth := map[string]uint64{}
		for i := range 400 {
			k := fmt.Sprint(min(rng.IntN(keys), rng.IntN(keys))) // skewed to small keys
			s.add([]byte(k))
			truth[k]++
			checkOrder(t, s)
			var sum uint64
			for _, e := range s.ord {
				sum += e.count
				if tc := truth[e.key]; e.count < tc || e.count-e.err > tc {
					t.Fatalf("seed %d add %d: %s=%d/%d, true count %d", seed, i, e.key, e.count, e.err, tc)
				}
			}
			if sum != s.n {
				t.Fatalf("seed %d add %d: counts sum to %d, %d adds", seed, i, sum, s.n)
			}
			for k, tc := range truth {
				if tc > s.n/uint64(capacity) && s.lookup(k) == nil {
					t.Fatalf("seed %d add %d: %s counted %d > %d/%d times is not held", seed, i, k, tc, s.n, capacity)
				}
			}
		}
		s.reset()
		checkOrder(t, s)
	}
}

// indexed returns the number of keys s's index holds.
func indexed(s *summary) int {
	n := 0
	for _, sl := range s.index.slots {
		if sl.at != 0 {
			n++
		}
	}
	return n
}
