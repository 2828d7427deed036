package local

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

func settleCfg(ts ...config.Tier) *config.Config {
	return normal(&config.Config{Resources: map[string]*config.Resource{
		"t": {Kind: config.KindTiers, Tiers: ts, GlobalLimit: config.Limit(1000)},
		"g": {Kind: config.KindGCRA, Burst: 10, Count: 10, Period: time.Second},
	}})
}

// A reload that shrinks or grows the tier list between a grant and its
// settle: the settle charges or gives back within the tiers there are now,
// and the key's state stays sane.
func TestSettleAcrossTierReload(t *testing.T) {
	three := []config.Tier{tier(2, 10*s, 10*s, 10*s, false), tier(4, 10*s, 10*s, 10*s, false), tier(8, 10*s, 10*s, 10*s, false)}
	one := []config.Tier{tier(2, 10*s, 10*s, 10*s, false)}
	for _, c := range []struct{ from, to []config.Tier }{{three, one}, {one, three}} {
		for _, real := range []int{0, 1, 50} {
			e := New(settleCfg(c.from...))
			var tks []string
			for i := range 6 {
				var d Decision
				tk, err := e.DecideSettle(&d, at(i), "t", "u", 2, 1)
				if err != nil {
					t.Fatal(err)
				}
				if tk != "" {
					tks = append(tks, tk)
				}
			}
			e2, _ := e.Reload(settleCfg(c.to...))
			for _, tk := range tks {
				if _, err := e2.Settle(at(10), tk, real); err != nil {
					t.Fatal(err)
				}
			}
			d, _ := e2.Request(at(11), "t", "u", 0, 0)
			if d.Remaining < 0 || d.TierHits < 0 || (real == 0 && d.TierHits != 0) || (real >= 50 && d.Remaining != 0) {
				t.Errorf("%d->%d tiers, %d tickets settled at %d: remaining %d, tier %d with %d hits", len(c.from), len(c.to), len(tks), real, d.Remaining, d.Tier, d.TierHits)
			}
		}
	}
}

// Concurrent settles of one ticket: exactly one charges, the others are
// ErrAlreadySettled.
func TestSettleOnceConcurrently(t *testing.T) {
	e := New(settleCfg(tier(100, 10*s, 10*s, 0, false)))
	for range 200 {
		var d Decision
		tk, err := e.DecideSettle(&d, at(0), "g", "u", 5, 5)
		if err != nil || tk == "" {
			_ = e.Reset(at(0), "g", "u")
			continue
		}
		var ok, already atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := e.Settle(at(1), tk, 0)
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, ErrAlreadySettled):
					already.Add(1)
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if ok.Load() != 1 || already.Load() != 7 {
			t.Fatalf("ok %d already %d", ok.Load(), already.Load())
		}
	}
}

// Settles, resets, reloads and decisions at once, for the race detector
// and lock order: each worker decides 2,000 times and a reload runs
// between.
func TestSettleResetReloadConcurrently(t *testing.T) {
	var cur atomic.Pointer[Engine]
	cur.Store(New(settleCfg(tier(50, 10*s, 10*s, 10*s, false), tier(100, 10*s, 10*s, 10*s, false))))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				e := cur.Load()
				res := []string{"t", "g"}[i%2]
				var d Decision
				tk, _ := e.DecideSettle(&d, at(i), res, "u", 3, 1)
				if tk != "" && i%3 != 0 {
					_, _ = cur.Load().Settle(at(i), tk, (i*w)%7)
				}
				if w == 0 && i%50 == 0 {
					_ = e.Reset(at(i), res, "u")
				}
				if w == 1 && i%100 == 0 {
					ts := []config.Tier{tier(50, 10*s, 10*s, 10*s, false)}
					if i%200 == 0 {
						ts = append(ts, tier(100, 10*s, 10*s, 10*s, false), tier(200, 10*s, 10*s, 10*s, false))
					}
					n, _ := e.Reload(settleCfg(ts...))
					cur.Store(n)
				}
			}
		}()
	}
	wg.Wait()
}

// A ticket granted before its key's reset settles nothing: a refund would
// take back counts made after the reset.
func TestSettleAfterResetChargesNothing(t *testing.T) {
	for _, res := range []string{"g", "t"} {
		e := settleEngine(t)
		_, tk := decideSettle(t, e, 0, res, 10)
		if err := e.Reset(at(1), res, "u"); err != nil {
			t.Fatal(err)
		}
		if d, _ := e.Request(at(2), res, "u", 10, 10); d.Granted != 10 {
			t.Fatalf("%s: after reset granted %d", res, d.Granted)
		}
		settle(t, e, 3, tk, 0)
		if d, _ := e.Request(at(4), res, "u", 10, 1); d.Granted != 0 {
			t.Errorf("%s: 10 spent after the reset, then an old ticket settled for 0: granted %d more", res, d.Granted)
		}
	}
}

// An overdraft is charged in every tier a request could climb into: it is
// not escaped by bursting into tier 2.
func TestSettleOverdraftNotEscapedByClimbing(t *testing.T) {
	e := New(normal(&config.Config{Resources: map[string]*config.Resource{
		"t": {Kind: config.KindTiers, Tiers: tiers(tier(10, 60*s, 3600*s, 3600*s, false), tier(20, 60*s, 3600*s, 3600*s, false))}}}))
	var d Decision
	tk, _ := e.DecideSettle(&d, at(0), "t", "u", 1, 1)
	st, _ := e.Settle(at(1), tk, 1_000_000)
	d2, _ := e.Request(at(2000), "t", "u", 20, 20)
	if d2.Granted != 0 {
		t.Errorf("settled 1,000,000 against tier limits 10 and 20 a minute (remaining after settle %d): the next request of 20 is granted %d (tier %d)", st.Remaining, d2.Granted, d2.Tier)
	}
}
