package topk

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// counters returns s's counters as "key=count/err", sorted by key.
func counters(s *summary) []string {
	var out []string
	for _, e := range s.heap {
		out = append(out, fmt.Sprintf("%s=%d/%d", e.key, e.count, e.err))
	}
	slices.Sort(out)
	return out
}

// checkHeap fails unless s's heap is a min-heap whose positions and index
// agree.
func checkHeap(t testing.TB, s *summary) {
	t.Helper()
	for i, e := range s.heap {
		if e.pos != i {
			t.Fatalf("heap[%d].pos = %d", i, e.pos)
		}
		if i > 0 && s.heap[(i-1)/2].count > e.count {
			t.Fatalf("heap[%d] = %d under a parent of %d", i, e.count, s.heap[(i-1)/2].count)
		}
		if s.index[e.key] != e {
			t.Fatalf("index[%q] is not heap[%d]", e.key, i)
		}
	}
	if len(s.index) != len(s.heap) {
		t.Fatalf("index has %d keys, heap %d", len(s.index), len(s.heap))
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
				checkHeap(t, s)
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
	if s.n != 0 || len(s.heap) != 0 || len(s.index) != 0 || len(s.slab) != 0 || s.min() != 0 {
		t.Fatalf("after reset: n %d heap %d index %d slab %d", s.n, len(s.heap), len(s.index), len(s.slab))
	}
	s.add([]byte("d"))
	if got := counters(s); !slices.Equal(got, []string{"d=1/0"}) {
		t.Errorf("after reset and an add: %v", got)
	}
	checkHeap(t, s)
}
