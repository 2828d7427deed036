package local

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestStoreMatchesMap drives the open-addressing store and a plain map with
// the same random inserts, updates, removes and sweeps, short keys and long
// ones, and checks they always hold the same keys and values.
func TestStoreMatchesMap(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		s := newStore[int64](1 << 30)
		ref := map[string]int64{}
		key := func() string {
			k := "d" + strconv.Itoa(rng.IntN(3000))
			if rng.IntN(10) == 0 {
				k += strings.Repeat("x", 30) // a long key
			}
			return k
		}
		for op := 0; op < 20000; op++ {
			k := key()
			sh, h := s.lock(k)
			p := sh.find(k, h)
			want, ok := ref[k]
			if (p != nil) != ok || (ok && *p != want) {
				sh.mu.Unlock()
				t.Fatalf("seed %d op %d: %q found=%v, map has %v=%d", seed, op, k, p != nil, ok, want)
			}
			switch r := rng.IntN(10); {
			case r < 5:
				v := rng.Int64N(100)
				if p != nil {
					*p = v
				} else if !s.insert(sh, k, h, v) {
					t.Fatal("insert refused below max")
				}
				ref[k] = v
			case r < 8:
				s.remove(sh, k, h)
				delete(ref, k)
			}
			sh.mu.Unlock()
			if op%2500 == 0 {
				cut := rng.Int64N(100)
				s.sweep(func(v int64) bool { return v < cut })
				for k, v := range ref {
					if v < cut {
						delete(ref, k)
					}
				}
			}
			if s.len() != len(ref) {
				t.Fatalf("seed %d op %d: store has %d keys, map %d", seed, op, s.len(), len(ref))
			}
		}
		for k, v := range ref {
			sh, h := s.lock(k)
			got, ok := sh.get(k, h)
			sh.mu.Unlock()
			if !ok || got != v {
				t.Fatalf("seed %d: final %q = %d,%v, want %d", seed, k, got, ok, v)
			}
		}
	}
}

func TestStoreMax(t *testing.T) {
	s := newStore[int64](2)
	for i, want := range []bool{true, true, false} {
		k := strconv.Itoa(i)
		sh, h := s.lock(k)
		if got := s.insert(sh, k, h, 1); got != want {
			t.Errorf("insert %d: %v, want %v", i, got, want)
		}
		sh.mu.Unlock()
	}
}
