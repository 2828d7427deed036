package local

import (
	"errors"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

// resetRecorder records the resets an engine records for the cluster.
type resetRecorder struct {
	nopRecorder
	resets []string
	full   bool
}

func (r *resetRecorder) Reset(domain string, at int64) bool {
	if r.full {
		return false
	}
	r.resets = append(r.resets, domain+"@"+time.UnixMilli(at).Sub(t0).String())
	return true
}

type resetCluster struct{ rec *resetRecorder }

func (c resetCluster) Register(string, ClusterSpec, Applier) Recorder { return c.rec }

func granted(t *testing.T, e *Engine, ms int, res, domain string, copies int) int {
	t.Helper()
	d, err := e.Request(at(ms), res, domain, copies, 1)
	if err != nil {
		t.Fatal(err)
	}
	return d.Granted
}

// A reset forgets a tiers key's hits, its tier instances and its share of
// the resource's last second (the global limit): the domain gets its whole
// limit again at once, and another domain is not limited by the reset
// domain's hits any more. It is recorded for the cluster.
func TestResetTiers(t *testing.T) {
	e := engine(t, one("t", &config.Resource{Kind: config.KindTiers,
		Tiers:       tiers(tier(5, s, s, 0, false), tier(5, 10*s, 10*s, 30*s, false)),
		GlobalLimit: config.Limit(12)}))
	rec := &resetRecorder{}
	e.Attach(resetCluster{rec})
	if g := granted(t, e, 0, "t", "a", 10); g != 10 {
		t.Fatalf("before: granted %d of 10, want 10 (both tiers)", g)
	}
	if g := granted(t, e, 1, "t", "a", 1); g != 0 {
		t.Fatalf("before: granted %d past both tiers, want 0", g)
	}
	if err := e.Reset(at(2), "t", "a"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a@2ms"}; len(rec.resets) != 1 || rec.resets[0] != want[0] {
		t.Fatalf("recorded %v, want %v", rec.resets, want)
	}
	ks, _ := e.State(at(3), "t", "a")
	for _, ts := range ks.Tiers {
		if ts.State != "inactive" || ts.Hits != 0 {
			t.Fatalf("after reset: tier %d %s with %d hits, want inactive with none", ts.Index, ts.State, ts.Hits)
		}
	}
	if g := granted(t, e, 3, "t", "b", 12); g != 10 {
		t.Fatalf("another domain after the reset: granted %d, want 10 (its tiers; a's hits left the global count)", g)
	}
	if g := granted(t, e, 4, "t", "a", 2); g != 2 {
		t.Fatalf("after reset: granted %d of 2, want 2 (global 12 holds b's 10)", g)
	}
}

// A peer's reset that arrives late (ApplyEntry of SlotReset at an instant
// before now) forgets only what was made before it: hits and a tier entry
// made after it stay.
func TestResetFromPeerKeepsLaterHits(t *testing.T) {
	e := engine(t, one("t", &config.Resource{Kind: config.KindTiers,
		Tiers: tiers(tier(5, 10*s, 10*s, 0, false), tier(5, 10*s, 10*s, 0, false))}))
	if g := granted(t, e, 0, "t", "a", 4); g != 4 {
		t.Fatalf("granted %d, want 4", g)
	}
	if g := granted(t, e, 500, "t", "a", 3); g != 3 {
		t.Fatalf("granted %d, want 3 (1 in tier 1, 2 entering tier 2)", g)
	}
	e.ApplyEntry("t", "a", SlotReset, t0.Add(200*time.Millisecond).UnixMilli(), at(600).UnixMilli())
	ks, _ := e.State(at(600), "t", "a")
	// Tier 1's instance began at 0, before the reset: its 4 hits then are
	// gone, its hit at 500 stays, and it counts as entered then. Tier 2's
	// began at 500, after it: it stays with its 2 hits.
	t1, t2 := ks.Tiers[0], ks.Tiers[1]
	if t1.State != "active" || t1.Hits != 1 || !t1.EnteredAt.Equal(at(500)) || t2.State != "active" || t2.Hits != 2 || !t2.EnteredAt.Equal(at(500)) {
		t.Fatalf("after a reset at 200 ms: tiers %+v, want both active, entered at 500 ms, with 1 and 2 hits", ks.Tiers)
	}
	d, err := e.Request(at(600), "t", "a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.DomainHitsLastSecond != 3 {
		t.Fatalf("last second holds %d hits, want the 3 made after the reset", d.DomainHitsLastSecond)
	}
}

// A gcra reset makes the bucket full again; copies, adaptive and pacer
// resources are the wrong kind; an undefined resource is unknown unless
// its namespace allows it, and then (unlimited) there is nothing to reset.
func TestResetGCRAAndErrors(t *testing.T) {
	cfg := normal(&config.Config{
		Namespaces: map[string]*config.Namespace{"open": {AllowUnconfigured: true}},
		Resources: map[string]*config.Resource{
			"g": {Kind: config.KindGCRA, Burst: 3, Count: 1, Period: time.Hour},
			"c": {Kind: config.KindCopies, DomainLimit: config.Limit(3)},
			"a": {Kind: config.KindAdaptive, MinWindow: 1, MaxWindow: 4},
		},
	})
	e := New(cfg)
	if g := granted(t, e, 0, "g", "a", 3); g != 3 {
		t.Fatalf("granted %d, want 3", g)
	}
	if g := granted(t, e, 1, "g", "a", 1); g != 0 {
		t.Fatalf("granted %d from an empty bucket, want 0", g)
	}
	if err := e.Reset(at(2), "g", "a"); err != nil {
		t.Fatal(err)
	}
	if g := granted(t, e, 3, "g", "a", 3); g != 3 {
		t.Fatalf("after reset: granted %d, want the whole burst, 3", g)
	}
	for _, tc := range []struct {
		res  string
		want error
	}{{"c", ErrWrongKind}, {"a", ErrWrongKind}, {"nope", ErrUnknownResource}, {"open/x", nil}} {
		if err := e.Reset(at(4), tc.res, "a"); !errors.Is(err, tc.want) {
			t.Errorf("Reset(%q) = %v, want %v", tc.res, err, tc.want)
		}
	}
}

// A reset the cluster refuses (it keeps as many resets as it may) is
// ErrTooMany, and the engine forgets nothing.
func TestResetRefusedByTheClusterForgetsNothing(t *testing.T) {
	e := engine(t, one("t", &config.Resource{Kind: config.KindTiers, Tiers: tiers(tier(5, s, s, 0, false))}))
	rec := &resetRecorder{full: true}
	e.Attach(resetCluster{rec})
	if g := granted(t, e, 0, "t", "a", 5); g != 5 {
		t.Fatalf("granted %d, want 5", g)
	}
	if err := e.Reset(at(1), "t", "a"); !errors.Is(err, ErrTooMany) {
		t.Fatalf("Reset = %v, want ErrTooMany", err)
	}
	if g := granted(t, e, 2, "t", "a", 1); g != 0 {
		t.Fatalf("after a refused reset: granted %d, want 0 (nothing forgotten)", g)
	}
}
