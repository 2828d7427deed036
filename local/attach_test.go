package local

import (
	"slices"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

// fakeCluster records what registers with it.
type fakeCluster struct{ regs map[string]fakeReg }

type fakeReg struct {
	spec ClusterSpec
	a    Applier
}

func (f *fakeCluster) Register(name string, spec ClusterSpec, a Applier) Recorder {
	f.regs[name] = fakeReg{spec, a}
	return nopRecorder{}
}

type nopRecorder struct{}

func (nopRecorder) TierHits(string, int64, int64, []int64, uint64) {}
func (nopRecorder) Spend(string, int64, int64)                     {}
func (nopRecorder) Refund(string, int64, int64)                    {}
func (nopRecorder) Reset(string, int64) bool                       { return true }
func (nopRecorder) TierRefund(string, int64, int64, []int64)       {}

// Attach registers each configured tiers, gcra and copies resource, once,
// with one applier; an unlimited rate resource and the per-agent kinds not
// at all, an unlimited copies one still (its peers' holds count). A
// reload registers its resources with the same cluster and applier, which
// from then on applies to the reloaded engine: a resource the reload added
// takes peers' counts.
func TestAttachRegistersAndReloadMovesTheApplier(t *testing.T) {
	hard := &config.Resource{Kind: config.KindTiers, Tiers: tiers(tier(5, s, s, 0, false)), HardLimit: config.Limit(8)}
	cfg1 := normal(&config.Config{
		Namespaces: map[string]*config.Namespace{"off": {IgnoreConfigured: true}},
		Resources: map[string]*config.Resource{
			"t/r":   hard,
			"g/r":   {Kind: config.KindGCRA, Burst: 10, Count: 10, Period: s},
			"c/r":   {Kind: config.KindCopies, DomainLimit: config.Limit(3)},
			"a/r":   {Kind: config.KindAdaptive, MinWindow: 1, MaxWindow: 4},
			"off/t": {Kind: config.KindTiers, Tiers: tiers(tier(5, s, s, 0, false))},
			"off/c": {Kind: config.KindCopies, DomainLimit: config.Limit(3)},
		},
	})
	f := &fakeCluster{regs: map[string]fakeReg{}}
	e := New(cfg1)
	e.Attach(f)
	names := func() []string {
		var out []string
		for n := range f.regs {
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	if got, want := names(), []string{"c/r", "g/r", "off/c", "t/r"}; !slices.Equal(got, want) {
		t.Fatalf("registered %v, want %v", got, want)
	}
	a := f.regs["t/r"].a
	for n, r := range f.regs {
		if r.a != a {
			t.Errorf("%s registered with another applier", n)
		}
	}
	if e.Cluster() != f {
		t.Errorf("Cluster() = %v, want the fake", e.Cluster())
	}

	cfg2 := normal(&config.Config{Resources: map[string]*config.Resource{
		"t/r":   {Kind: config.KindTiers, Tiers: tiers(tier(5, s, s, 0, false)), HardLimit: config.Limit(8)},
		"t/new": {Kind: config.KindTiers, Tiers: tiers(tier(5, s, s, 0, false)), HardLimit: config.Limit(8)},
	}})
	n, _ := e.Reload(cfg2)
	if r, ok := f.regs["t/new"]; !ok || r.a != a {
		t.Fatalf("t/new registered %v with applier %v, want the same applier %v", ok, r.a, a)
	}
	now := t0.UnixMilli()
	a.ApplyCount("t/new", "d", SlotTotal, now, 20, 6, now) // a peer's 6 hits of the hard limit's 8
	d, err := n.Request(time.UnixMilli(now), "t/new", "d", 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Granted != 2 {
		t.Errorf("the reloaded engine granted %d, want 2 (the peer's 6 hits applied to it)", d.Granted)
	}
}

// ClusterSpecOf: a tiers resource's spans are the longest of the default's
// and the overrides' per slot, its slot limits the least, slot 0's the hard
// limit (else the global one); a gcra resource's life is the longest burst
// offset, its limits the default burst, and it ships late buckets; copies
// have no slots.
func TestClusterSpecOf(t *testing.T) {
	parse := func(js string) *config.Resource {
		t.Helper()
		rc, err := config.ParseResource([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}
	for _, tc := range []struct {
		name string
		rc   *config.Resource
		want ClusterSpec
	}{
		{"tiers, an override with a longer window and a second tier",
			parse(`{"kind":"tiers","tiers":"10,1,1,0","hard_limit":20,"drift":0.1,"domains":{"big":{"tiers":"5,2,2,0,3,10,10,30"}}}`),
			ClusterSpec{Drift: 0.1, Hard: 20, Spans: []Span{{Hits: 1000}, {Hits: 2000, Entry: 2000}, {Hits: 10_000, Entry: 40_000}}, Limits: []int64{20, 5, 3}}},
		{"tiers, a global limit and no hard one",
			parse(`{"kind":"tiers","tiers":"10,1,1,0","global_limit":100}`),
			ClusterSpec{Drift: config.DefaultDrift, Global: 100, Spans: []Span{{Hits: 1000}, {Hits: 1000, Entry: 1000}}, Limits: []int64{100, 10}}},
		{"gcra, an override with a longer burst offset",
			parse(`{"kind":"gcra","burst":10,"count":10,"period":"1s","domains":{"slow":{"burst":4,"count":1,"period":"1s"}}}`),
			ClusterSpec{Drift: config.DefaultDrift, Spans: []Span{{Hits: 4000}, {Hits: 4000}}, Limits: []int64{10, 10}, ShipLate: true}},
		{"copies", parse(`{"kind":"copies","domain_limit":3,"drift":0}`), ClusterSpec{}},
	} {
		got := ClusterSpecOf(tc.rc)
		if got.Drift != tc.want.Drift || got.Hard != tc.want.Hard || got.Global != tc.want.Global || got.ShipLate != tc.want.ShipLate ||
			!slices.Equal(got.Spans, tc.want.Spans) || !slices.Equal(got.Limits, tc.want.Limits) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
