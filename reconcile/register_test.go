package reconcile

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/obol-dev/obol/gossip/packet"
	"github.com/obol-dev/obol/internal/clock"
	"github.com/obol-dev/obol/local"
)

// recApplier records what is applied to it, key by key.
type recApplier struct {
	mu     sync.Mutex
	counts map[string]int64 // resource|domain → hits
	widths map[string]int64 // resource|domain → the last bucket width
	holds  map[string]int64
}

func newRecApplier() *recApplier {
	return &recApplier{counts: map[string]int64{}, widths: map[string]int64{}, holds: map[string]int64{}}
}

func (a *recApplier) ApplyCount(resource, domain string, slot int, at, width, n, now int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.counts[resource+"|"+domain] += n
	a.widths[resource+"|"+domain] = width
}

func (a *recApplier) ApplyEntry(string, string, int, int64, int64) {}

func (a *recApplier) AddRemoteHolds(resource, domain string, n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.holds[resource+"|"+domain] += n
}

func (a *recApplier) EachHold(func(string, string, int64)) {}

func (a *recApplier) count(k string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts[k]
}

// oneTier is the spec of one tier whose window is a second (20 ms buckets).
var oneTier = local.ClusterSpec{Drift: 0.05, Spans: []local.Span{{Hits: 1000}, {Hits: 1000, Entry: 1000}}, Limits: []int64{0, 10}}

// TestPacketsGoToTheirRegistrant: a peer's counts of a resource are applied
// to the applier it was registered with, whatever its name ("rls:7",
// registered by the engine, goes to the engine; no prefix routes), at the
// bucket width of its spec; those of a name nobody registered are applied
// nowhere, and still counted as applied, as they always were. Holds too.
func TestPacketsGoToTheirRegistrant(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := New(Options{Name: "self", Clock: clock.NewFake(now)})
	eng, store := newRecApplier(), newRecApplier()
	c.Register("a/x", oneTier, eng)
	c.Register("rls:7", oneTier, eng)
	c.Register("rls:10", oneTier, store)
	c.Register("c/jobs", local.ClusterSpec{}, eng)
	ms := now.UnixMilli()
	b := ms - ms%20
	var names []packet.Name
	var counts []packet.Count
	for _, k := range [][2]string{{"a/x", "d"}, {"rls:7", "k"}, {"rls:10", "k"}, {"z/z", "d"}} {
		h := KeyHash(k[0], k[1])
		names = append(names, packet.Name{Hash: h, Resource: k[0], Domain: k[1]})
		counts = append(counts, packet.Count{Hash: h, Slot: 1, Bucket: b, Value: 3})
	}
	hj := KeyHash("c/jobs", "acme")
	names = append(names, packet.Name{Hash: hj, Resource: "c/jobs", Domain: "acme"})
	c.HandlePacket(&packet.Packet{From: "peer", Incarnation: 1, Names: names, Counts: counts,
		Gauges: []packet.Gauge{{Hash: hj, Value: 2, Version: 1}}})
	for _, tc := range []struct {
		a    *recApplier
		key  string
		want int64
	}{
		{eng, "a/x|d", 3}, {eng, "rls:7|k", 3}, {store, "rls:10|k", 3},
		{eng, "rls:10|k", 0}, {store, "rls:7|k", 0}, {store, "a/x|d", 0}, {eng, "z/z|d", 0}, {store, "z/z|d", 0},
	} {
		if got := tc.a.count(tc.key); got != tc.want {
			t.Errorf("%s: %d applied, want %d", tc.key, got, tc.want)
		}
	}
	if w := eng.widths["a/x|d"]; w != 20 {
		t.Errorf("width %d, want 20 (a fiftieth of the second)", w)
	}
	if eng.holds["c/jobs|acme"] != 2 || store.holds["c/jobs|acme"] != 0 {
		t.Errorf("holds: engine %v, store %v; want 2 at the engine", eng.holds, store.holds)
	}
	if got := c.Stats().CountsApplied; got != 12 {
		t.Errorf("counts applied %d, want 12 (the unregistered name's 3 too)", got)
	}
}

// A resource registered again (a reload) goes to its new applier; an
// applier no resource is registered with any more is not asked for holds
// or TATs; the tap of SetApplier takes every resource's records, and is
// the one asked, until it is taken away.
func TestRegisterAgainAndTap(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := New(Options{Name: "self", Clock: clock.NewFake(now)})
	a1, a2, tap := newRecApplier(), newRecApplier(), newRecApplier()
	asked := func() []*recApplier {
		var out []*recApplier
		c.eachApplier(func(a Applier) { out = append(out, a.(*recApplier)) })
		return out
	}
	c.Register("a/x", oneTier, a1)
	c.Register("a/y", oneTier, a1)
	c.Register("a/x", oneTier, a2)
	if got := asked(); !slices.Equal(got, []*recApplier{a1, a2}) {
		t.Fatalf("asked %v, want a1 (a/y) and a2 (a/x)", got)
	}
	c.Register("a/y", oneTier, a2)
	if got := asked(); !slices.Equal(got, []*recApplier{a2}) {
		t.Fatalf("asked %v, want a2 alone", got)
	}
	ms := now.UnixMilli()
	h := KeyHash("a/x", "d")
	pkt := func(v uint64) *packet.Packet {
		return &packet.Packet{From: "peer", Incarnation: 1, Names: []packet.Name{{Hash: h, Resource: "a/x", Domain: "d"}},
			Counts: []packet.Count{{Hash: h, Slot: 1, Bucket: ms - ms%20, Value: v}}}
	}
	c.HandlePacket(pkt(2))
	c.SetApplier(tap)
	if got := asked(); !slices.Equal(got, []*recApplier{tap}) {
		t.Fatalf("asked %v with a tap, want the tap", got)
	}
	c.HandlePacket(pkt(5))
	c.SetApplier(nil)
	c.HandlePacket(pkt(6))
	if a1.count("a/x|d") != 0 || a2.count("a/x|d") != 3 || tap.count("a/x|d") != 3 {
		t.Errorf("applied: a1 %d, a2 %d, tap %d; want 0, 2+1 and 3", a1.count("a/x|d"), a2.count("a/x|d"), tap.count("a/x|d"))
	}
}
