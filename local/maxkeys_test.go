package local

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

// maxkeys_test.go: at max_keys limiting never switches off, and a peer's
// counts never wrap.

// TestMaxKeysFullTiersStillLimits fills a tiers resource's max_keys with
// keys whose windows have not ended, then a key limited to 10 a minute is
// refused on its 11th hit, and a peer's hits of a key past the cap count.
func TestMaxKeysFullTiersStillLimits(t *testing.T) {
	e := engine(t, one("m/r", &config.Resource{Kind: config.KindTiers, MaxKeys: 64, Tiers: tiers(tier(10, time.Minute, time.Hour, 0, false))}))
	for i := range 500 {
		if _, err := e.Request(at(0), "m/r", "fill"+strconv.Itoa(i), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if k := e.Keys("m/r"); k != 64 {
		t.Fatalf("%d keys, want the cap of 64", k)
	}
	for i := 1; i <= 11; i++ {
		d, err := e.Request(at(i*1000), "m/r", "victim", 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if i == 11 {
			want = 0
		}
		if d.Granted != want || d.Lenient {
			t.Fatalf("hit %d of a key limited to 10/minute past the cap: granted %d (lenient %v), want %d", i, d.Granted, d.Lenient, want)
		}
	}
	if e.Stats().Overflowed.Load() == 0 {
		t.Fatalf("overflowed %d, want some", e.Stats().Overflowed.Load())
	}
	// A peer's hits of a key past the cap are applied (to its overflow
	// state), clamped to the largest limit + 1, never wrapped.
	for range 4 {
		e.ApplyCount("m/r", "peer", 1, 12_000, 1200, 1<<62, 12_000)
	}
	if e.Stats().Overflowed.Load() < 15 {
		t.Fatalf("a peer's counts past the cap not counted in overflow: %d", e.Stats().Overflowed.Load())
	}
}

func TestTiersClaimBound(t *testing.T) {
	p := tiersParamsOf(tiers(tier(10, s, s, 0, false), tier(40, time.Minute, time.Hour, 0, false)), 25, NoLimit)
	if b := p.claimBound(); b != 41 {
		t.Fatalf("claim bound %d, want the largest limit + 1 = 41", b)
	}
}

// TestMaxKeysEvictsIdle: at the cap, keys that have fully reset make room
// for new ones, which are then tracked, not overflowed.
func TestMaxKeysEvictsIdle(t *testing.T) {
	const n = 256 * 8
	e := engine(t, one("m/r", &config.Resource{Kind: config.KindTiers, MaxKeys: n, Tiers: tiers(tier(10, s, s, 0, false))}))
	for i := range n {
		_, _ = e.Request(at(0), "m/r", "old"+strconv.Itoa(i), 1, 1)
	}
	for i := range n {
		_, _ = e.Request(at(5000), "m/r", "new"+strconv.Itoa(i), 1, 1)
	}
	st := e.Stats()
	t.Logf("%d new keys at the cap: %d took a reset key's place, %d overflowed", n, st.Evicted.Load(), st.Overflowed.Load())
	// A shard that gets more new keys than it had reset ones overflows
	// the rest until Step.
	if st.Evicted.Load() < n*85/100 || st.Evicted.Load()+st.Overflowed.Load() != n {
		t.Fatalf("evicted %d of %d", st.Evicted.Load(), n)
	}
}

// TestMaxKeysOverflowFalseDenials measures the overflow states' false
// denials: 20,000 keys past a full store each make up to their limit of
// 10 hits in a minute; a refusal within a key's own limit is false. The
// 11th hit of a key is always refused (never an under-count).
func TestMaxKeysOverflowFalseDenials(t *testing.T) {
	e := engine(t, one("m/r", &config.Resource{Kind: config.KindTiers, MaxKeys: 16, Tiers: tiers(tier(10, time.Minute, time.Hour, 0, false))}))
	for i := range 16 {
		_, _ = e.Request(at(0), "m/r", "fill"+strconv.Itoa(i), 1, 1)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	const keys = 20_000
	hits, refused := 0, 0
	for i := range keys {
		dom := "k" + strconv.Itoa(i)
		n := 1 + rng.IntN(10)
		for range n {
			hits++
			if d, _ := e.Request(at(1000), "m/r", dom, 1, 1); d.Granted == 0 {
				refused++
			}
		}
		if d, _ := e.Request(at(1000), "m/r", dom, 1, 1); n == 10 && d.Granted != 0 {
			t.Fatalf("key %d: 11th hit granted past the cap", i)
		}
	}
	share := float64(refused) / float64(hits)
	t.Logf("overflow states: %d keys, %d hits within their limits, %d refused (%.2f%%)", keys, hits, refused, 100*share)
	if share > 0.25 {
		t.Fatalf("false denials %.2f%%", 100*share)
	}
}

// FuzzDequeNeverDecreases: any sequence of hits added to a tier's deque
// never makes its sum smaller.
func FuzzDequeNeverDecreases(f *testing.F) {
	f.Add(int64(1<<62), int64(1<<62), int64(1<<62), int64(5))
	f.Fuzz(func(t *testing.T, a, b, c, d int64) {
		var q deque
		prev := int64(0)
		for i, n := range []int64{a, b, c, d} {
			if n < 0 {
				n = -n
			}
			if n < 0 { // MinInt64
				n = 0
			}
			q.insert(int64(i%2), n)
			if q.sum < prev {
				t.Fatalf("adding %d: sum %d went below %d", n, q.sum, prev)
			}
			prev = q.sum
		}
	})
}

// TestGCRAPeerSpendSaturates: a peer's spend of 2^62 tokens used to wrap
// the bucket's TAT into the past (full again); it saturates: the bucket
// stays empty.
func TestGCRAPeerSpendSaturates(t *testing.T) {
	p := newGCRAParams(10, 10, time.Second)
	tat := gcraApplySpend(&p, 0, 1e9, 1<<62, nil)
	if tat < 1e9 {
		t.Fatalf("TAT after a spend of 2^62: %d, before the spend", tat)
	}
	if o := gcraDecide(&p, tat, 1e9, 1, 1); o.granted != 0 {
		t.Fatalf("after a spend of 2^62: granted %d, want 0", o.granted)
	}
}

// TestCopiesPeerHoldsSaturate: a peer's holds of 2^62, four times over,
// used to wrap the peers' counts negative (room again); they saturate.
func TestCopiesPeerHoldsSaturate(t *testing.T) {
	e := engine(t, one("c/r", &config.Resource{Kind: config.KindCopies, DomainLimit: config.Limit(5), GlobalLimit: config.Limit(50)}))
	for range 4 {
		e.AddRemoteHolds("c/r", "d", 1<<62)
	}
	sid, err := e.OpenSession(at(0), 10*s)
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Reserve(at(0), "c/r", "d", 1, 1, sid)
	if err != nil {
		t.Fatal(err)
	}
	if d.Granted != 0 {
		t.Fatalf("after peers' holds of 4 × 2^62: granted %d, want 0", d.Granted)
	}
	d, _ = e.Reserve(at(0), "c/r", "other", 1, 1, sid)
	if d.Granted != 0 {
		t.Fatalf("another domain under the global limit: granted %d, want 0", d.Granted)
	}
}
