package local

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

func TestReloadKeepsCountsAndHolds(t *testing.T) {
	cfg1 := &config.Config{
		Namespaces: map[string]*config.Namespace{"open": {AllowUnconfigured: true}},
		Resources: map[string]*config.Resource{
			"r/tiers":   {Kind: config.KindTiers, Tiers: tiers(tier(5, s, s, 0, false), tier(5, s, s, 0, false))},
			"r/gcra":    {Kind: config.KindGCRA, Burst: 2, Count: 1, Period: s},
			"r/jobs":    {Kind: config.KindCopies, DomainLimit: config.Limit(3), Groups: []config.Group{{Name: "g", Limit: config.Limit(4), Domains: []string{"a", "b"}}}},
			"r/gone":    {Kind: config.KindCopies, DomainLimit: config.Limit(3)},
			"r/flipped": {Kind: config.KindTiers, Tiers: tiers(tier(1, s, s, 0, false))},
		},
	}
	e := New(normal(cfg1))
	mustGrant := func(e *Engine, res, dom string, n int, want int) {
		t.Helper()
		d, err := e.Request(at(0), res, dom, n, 0)
		if err != nil || d.Granted != want {
			t.Fatalf("%s %s: granted %d (%v), want %d", res, dom, d.Granted, err, want)
		}
	}
	mustGrant(e, "r/tiers", "a", 7, 7) // tier 1 full, 2 hits in tier 2
	mustGrant(e, "r/gcra", "a", 2, 2)
	mustGrant(e, "r/flipped", "a", 1, 1)
	mustGrant(e, "open/x", "a", 3, 3)
	sid, _ := e.OpenSession(at(0), time.Minute)
	h, _ := e.Reserve(at(0), "r/jobs", "a", 3, 3, sid)
	hg, _ := e.Reserve(at(0), "r/gone", "a", 2, 2, sid)
	if h.Granted != 3 || hg.Granted != 2 {
		t.Fatalf("reservations: %+v %+v", h, hg)
	}

	cfg2 := &config.Config{
		Namespaces: map[string]*config.Namespace{"open": {AllowUnconfigured: true}},
		Resources: map[string]*config.Resource{
			// One tier now, of 10: the key keeps tier 1's entry and its 5 hits.
			"r/tiers":   {Kind: config.KindTiers, Tiers: tiers(tier(10, s, s, 0, false))},
			"r/gcra":    {Kind: config.KindGCRA, Burst: 2, Count: 1, Period: s},
			"r/jobs":    {Kind: config.KindCopies, DomainLimit: config.Limit(5), Groups: []config.Group{{Name: "g2", Limit: config.Limit(4), Domains: []string{"a"}}}},
			"r/flipped": {Kind: config.KindGCRA, Burst: 1, Count: 1, Period: s},
			"r/new":     {Kind: config.KindGCRA, Burst: 1, Count: 1, Period: s},
		},
	}
	n, ch := e.Reload(normal(cfg2))
	want := Changes{Added: []string{"r/new"}, Removed: []string{"r/gone"}, Changed: []string{"r/jobs", "r/tiers"}, KindChanged: []string{"r/flipped"}, Unchanged: 1, Released: 2}
	if !reflect.DeepEqual(ch, want) {
		t.Fatalf("changes %+v, want %+v", ch, want)
	}
	// "A resource whose kind is unchanged keeps its counts and holds across a reload"
	mustGrant(n, "r/tiers", "a", 10, 5)  // 10 − the 5 hits tier 1 kept
	mustGrant(n, "r/gcra", "a", 1, 0)    // the bucket is still empty
	mustGrant(n, "r/flipped", "a", 1, 1) // kind changed: a fresh bucket
	if d, _ := n.Request(at(1), "open/x", "a", 0, 0); d.DomainHitsLastSecond != 3 {
		t.Fatalf("unconfigured resource lost its hits: %d", d.DomainHitsLastSecond)
	}
	// Holds kept under the new limits; the group count is recomputed (g2 holds a's 3).
	r, err := n.Reserve(at(1), "r/jobs", "a", 5, 1, sid)
	if err != nil || r.Granted != 1 || r.DomainHolds != 4 || len(r.Groups) != 1 || r.Groups[0].Holds != 4 {
		t.Fatalf("after reload: %+v %v, want 1 more (g2 limit 4)", r, err)
	}
	// "a removed resource's holds are released"
	if _, _, err := n.Release(at(1), hg.Hold, 1); !errors.Is(err, ErrUnknownHold) {
		t.Fatalf("hold of a removed resource: %v", err)
	}
	if _, _, err := n.Release(at(1), h.Hold, 3); err != nil {
		t.Fatalf("hold kept across reload: %v", err)
	}
	if got, err := n.EndSession(at(2), sid); err != nil || got != 1 {
		t.Fatalf("end session: %d %v, want the 1 copy left", got, err)
	}
	// A decision still in flight on the old engine lands in the shared state.
	mustGrant(e, "r/gcra", "b", 2, 2)
	mustGrant(n, "r/gcra", "b", 1, 0)
}

func TestReloadTierCountGrows(t *testing.T) {
	e := New(one("r/t", &config.Resource{Kind: config.KindTiers, Tiers: tiers(tier(2, s, s, 0, false))}))
	if d, _ := e.Request(at(0), "r/t", "a", 2, 2); d.Granted != 2 {
		t.Fatal("setup")
	}
	n, _ := e.Reload(one("r/t", &config.Resource{Kind: config.KindTiers, Tiers: tiers(tier(2, s, s, 0, false), tier(3, s, s, 0, false))}))
	d, err := n.Request(at(1), "r/t", "a", 5, 1)
	if err != nil || d.Granted != 3 || d.Tier != 2 || !d.Burst {
		t.Fatalf("after growing the tier list: %+v %v, want 3 from the new tier 2", d, err)
	}
	ks, _ := n.State(at(1), "r/t", "a")
	if len(ks.Tiers) != 2 {
		t.Fatalf("state shows %d tiers, want 2", len(ks.Tiers))
	}
}
