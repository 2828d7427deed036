package ring

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("node-%d", i)
	}
	return out
}

func TestOwnersEdges(t *testing.T) {
	var zero *Ring
	if o, s := zero.Owners(1); o != "" || s != "" {
		t.Fatalf("nil ring owns %q %q", o, s)
	}
	if o, s := New(nil).Owners(1); o != "" || s != "" {
		t.Fatalf("empty ring owns %q %q", o, s)
	}
	one := New([]string{"a", "", "a"})
	if one.Members() != 1 || !one.Has("a") || one.Has("") || !slices.Equal(one.Names(), []string{"a"}) {
		t.Fatalf("one member ring: %d members %q", one.Members(), one.Names())
	}
	if zero.Names() != nil {
		t.Fatalf("nil ring names %q", zero.Names())
	}
	for h := range uint64(100) {
		if o, s := one.Owners(h); o != "a" || s != "" {
			t.Fatalf("one member: Owners(%d) = %q %q", h, o, s)
		}
	}
	two := New([]string{"b", "a"})
	if !slices.Equal(two.Names(), []string{"a", "b"}) {
		t.Fatalf("two members: Names %q, want sorted [a b]", two.Names())
	}
	for h := range uint64(100) {
		o, s := two.Owners(h)
		if o == s || (o != "a" && o != "b") || (s != "a" && s != "b") {
			t.Fatalf("two members: Owners(%d) = %q %q", h, o, s)
		}
	}
}

// TestSameMembersSamePlacement: the order members are listed in does not
// change where a key goes.
func TestSameMembersSamePlacement(t *testing.T) {
	a := New([]string{"x", "y", "z", "w"})
	b := New([]string{"w", "z", "y", "x", "x"})
	for h := range uint64(10_000) {
		oa, sa := a.Owners(h * 0x1234567)
		ob, sb := b.Owners(h * 0x1234567)
		if oa != ob || sa != sb {
			t.Fatalf("hash %d: %s/%s vs %s/%s", h, oa, sa, ob, sb)
		}
	}
}

// TestBalance: at 10, 100 and 1000 members every member owns within
// ±60% of 1/N of 200,000 keys, and the spread (coefficient of variation)
// is under 0.2.
func TestBalance(t *testing.T) {
	for _, n := range []int{10, 100, 1000} {
		r := New(names(n))
		own := map[string]int{}
		const keys = 200_000
		for h := range uint64(keys) {
			o, _ := r.Owners(h)
			own[o]++
		}
		mean := float64(keys) / float64(n)
		var ss float64
		for _, m := range names(n) {
			c := float64(own[m])
			if c < 0.4*mean || c > 1.6*mean {
				t.Errorf("n=%d: %s owns %v keys, mean %v", n, m, c, mean)
			}
			ss += (c - mean) * (c - mean)
		}
		if cv := math.Sqrt(ss/float64(n)) / mean; cv > 0.2 {
			t.Errorf("n=%d: coefficient of variation %.3f", n, cv)
		}
	}
}

// TestMemberGoes: when an owner goes, its keys go to their successor and
// no other key moves; when a member joins, a key moves only to it.
func TestMemberGoes(t *testing.T) {
	all := names(50)
	r := New(all)
	gone := New(all[1:])
	joined := New(append(names(50), "newcomer"))
	for h := range uint64(50_000) {
		o, s := r.Owners(h)
		o2, _ := gone.Owners(h)
		switch {
		case o == all[0] && o2 != s:
			t.Fatalf("hash %d: owner went, new owner %s, successor was %s", h, o2, s)
		case o != all[0] && o2 != o:
			t.Fatalf("hash %d: moved from %s to %s though its owner stayed", h, o, o2)
		}
		if o3, _ := joined.Owners(h); o3 != o && o3 != "newcomer" {
			t.Fatalf("hash %d: moved from %s to %s on a join", h, o, o3)
		}
	}
}

func BenchmarkOwners(b *testing.B) {
	for _, n := range []int{10, 1000} {
		r := New(names(n))
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			var h uint64
			for b.Loop() {
				h += 0x9e3779b97f4a7c15
				r.Owners(h)
			}
		})
	}
}

func BenchmarkNew1000(b *testing.B) {
	ms := names(1000)
	b.ReportAllocs()
	for b.Loop() {
		New(ms)
	}
}

// TestWalk: the walk starts with Owners' pair, names each member once,
// and its third member is the successor once the owner goes (and so on
// down the walk), at every size.
func TestWalk(t *testing.T) {
	if got := (*Ring)(nil).Walk(nil, 1, 3); got != nil {
		t.Errorf("nil ring: %q", got)
	}
	for _, n := range []int{1, 2, 3, 10, 40} {
		ms := make([]string, n)
		for i := range ms {
			ms[i] = fmt.Sprintf("node-%d", i)
		}
		r := New(ms)
		for h := uint64(0); h < 500; h++ {
			w := r.Walk(nil, h*0x9e3779b97f4a7c15, 4)
			if want := min(n, 4); len(w) != want {
				t.Fatalf("n=%d: walk of %d, want %d", n, len(w), want)
			}
			o, s := r.Owners(h * 0x9e3779b97f4a7c15)
			if w[0] != o || (n > 1 && w[1] != s) {
				t.Fatalf("n=%d h=%d: walk %q, owners %q %q", n, h, w, o, s)
			}
			seen := map[string]bool{}
			for _, m := range w {
				if seen[m] {
					t.Fatalf("n=%d: %q twice in %q", n, m, w)
				}
				seen[m] = true
			}
			if n >= 3 {
				// Without the owner, the successor owns the key and the
				// walk's third member succeeds it.
				o2, s2 := New(slices.DeleteFunc(slices.Clone(ms), func(m string) bool { return m == w[0] })).Owners(h * 0x9e3779b97f4a7c15)
				if o2 != w[1] || s2 != w[2] {
					t.Fatalf("n=%d h=%d: without %s owners %s %s, walk %q", n, h, w[0], o2, s2, w)
				}
			}
		}
	}
}
