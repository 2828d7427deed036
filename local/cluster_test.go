package local

import (
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

func TestDequeInsertKeepsTimeOrder(t *testing.T) {
	var d deque
	for _, at := range []int64{10, 20, 30} {
		d.push(at, 1)
	}
	d.insert(15, 2) // between
	d.insert(5, 1)  // before all
	d.insert(20, 3) // merges with a stamp
	d.insert(40, 1) // after all: a push
	want := []stamp{{5, 1}, {10, 1}, {15, 2}, {20, 4}, {30, 1}, {40, 1}}
	got := d.live()
	if len(got) != len(want) || d.sum != 10 {
		t.Fatalf("deque %v sum %d, want %v sum 10", got, d.sum, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("deque %v, want %v", got, want)
		}
	}
	d.prune(15)
	if d.sum != 6 || len(d.live()) != 3 {
		t.Fatalf("after prune: %v sum %d", d.live(), d.sum)
	}
}

// peerCfg is one tiers resource (5 per second, then a prison tier of 1 per
// 10 s), one gcra bucket and one copies resource.
func peerCfg() *config.Config {
	return normal(&config.Config{Resources: map[string]*config.Resource{
		"t/r": {Kind: config.KindTiers, Tiers: tiers(tier(5, s, s, 0, false), tier(1, 10*s, 10*s, 0, false)), HardLimit: config.Limit(8)},
		"g/r": {Kind: config.KindGCRA, Burst: 10, Count: 10, Period: s},
		"c/r": {Kind: config.KindCopies, DomainLimit: config.Limit(3), GlobalLimit: config.Limit(5),
			Groups: []config.Group{{Name: "big", Limit: config.Limit(4), Domains: []string{"a", "b"}}}},
	}})
}

func TestApplyCountTiers(t *testing.T) {
	ms := t0.UnixMilli()
	cases := []struct {
		name       string
		entries    [][2]int64 // (tier slot, at offset)
		counts     [][3]int64 // (slot, at offset, n)
		now        int64      // offset of the peek
		wantGrant  int        // what a request of 5 at now gets (min 1)
		wantDomain int        // domain hits in the last second
	}{
		{name: "no entry: tier hits begin an instance at their bucket (the entry may come later, or never: a count belongs to the mesh)", counts: [][3]int64{{1, 0, 3}, {0, 0, 3}}, now: 10, wantGrant: 3, wantDomain: 3},
		{name: "no entry, hits of an instance that has ended: dropped", counts: [][3]int64{{1, -1500, 3}}, now: 10, wantGrant: 5, wantDomain: 0},
		{name: "no entry, prison hits from a state (not fresh): dropped, their instance may have ended", counts: [][3]int64{{2, -3000, 1}}, now: 10, wantGrant: 5, wantDomain: 0},
		{name: "no entry, fresh prison hits begin the prison", counts: [][3]int64{{2, 0, 1}}, now: 10, wantGrant: 0, wantDomain: 0},
		{name: "entered: tier hits count", entries: [][2]int64{{1, 0}}, counts: [][3]int64{{1, 0, 3}, {0, 0, 3}}, now: 10, wantGrant: 3, wantDomain: 3}, // 2 in tier 1, 1 bursting into tier 2
		{name: "hits of an earlier instance are dropped", entries: [][2]int64{{1, 0}}, counts: [][3]int64{{1, -300, 3}}, now: 10, wantGrant: 5, wantDomain: 0},
		{name: "a bucket straddling the entry counts", entries: [][2]int64{{1, 0}}, counts: [][3]int64{{1, -10, 3}}, now: 10, wantGrant: 3, wantDomain: 0},
		{name: "hits older than the window are dropped", entries: [][2]int64{{1, 0}}, counts: [][3]int64{{1, -1000, 3}}, now: 10, wantGrant: 5, wantDomain: 0},
		{name: "ended instance: the entry is ignored", entries: [][2]int64{{1, -2000}}, counts: [][3]int64{{1, -1500, 5}}, now: 10, wantGrant: 5, wantDomain: 0},
		{name: "hard limit counts peers' totals", counts: [][3]int64{{0, 0, 6}}, now: 10, wantGrant: 2, wantDomain: 6},
		{name: "prison shared", entries: [][2]int64{{1, 0}, {2, 5}}, counts: [][3]int64{{1, 0, 5}, {2, 5, 1}, {0, 0, 6}}, now: 1500, wantGrant: 0, wantDomain: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := New(peerCfg())
			now := ms + tc.now
			for _, en := range tc.entries {
				e.ApplyEntry("t/r", "d", int(en[0]), ms+en[1], now)
			}
			for _, c := range tc.counts {
				e.ApplyCount("t/r", "d", int(c[0]), ms+c[1], 20, c[2], now)
			}
			d, err := e.Request(time.UnixMilli(now), "t/r", "d", 5, 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Granted != tc.wantGrant {
				t.Errorf("granted %d, want %d (%+v)", d.Granted, tc.wantGrant, d)
			}
			if got := d.DomainHitsLastSecond - d.Granted; got != tc.wantDomain {
				t.Errorf("domain hits before the request %d, want %d", got, tc.wantDomain)
			}
		})
	}
}

func TestApplyEntryEarliestWins(t *testing.T) {
	ms := t0.UnixMilli()
	e := New(peerCfg())
	// Locally: tier 1 entered at +100.
	if d, _ := e.Request(time.UnixMilli(ms+100), "t/r", "d", 1, 1); d.Granted != 1 {
		t.Fatal("first hit rejected")
	}
	// A peer entered the same instance earlier, at +0: ours now ends at
	// +1000, not +1100.
	e.ApplyEntry("t/r", "d", 1, ms, ms+200)
	ks, _ := e.State(time.UnixMilli(ms+200), "t/r", "d")
	if got := ks.Tiers[0].EnteredAt.UnixMilli() - ms; got != 0 {
		t.Fatalf("entered at +%d, want +0", got)
	}
	// A later entry of the same instance changes nothing.
	e.ApplyEntry("t/r", "d", 1, ms+500, ms+600)
	ks, _ = e.State(time.UnixMilli(ms+600), "t/r", "d")
	if got := ks.Tiers[0].EnteredAt.UnixMilli() - ms; got != 0 {
		t.Fatalf("entered at +%d after a later entry, want +0", got)
	}
	// At +1000 the instance is over; a peer's new instance at +1200 starts
	// ours afresh.
	e.ApplyEntry("t/r", "d", 1, ms+1200, ms+1300)
	ks, _ = e.State(time.UnixMilli(ms+1300), "t/r", "d")
	if ks.Tiers[0].State != "active" || ks.Tiers[0].EnteredAt.UnixMilli()-ms != 1200 || ks.Tiers[0].Hits != 0 {
		t.Fatalf("new instance: %+v", ks.Tiers[0])
	}
}

func TestApplyCountGCRA(t *testing.T) {
	ms := t0.UnixMilli()
	e := New(peerCfg())
	e.ApplyCount("g/r", "k", 0, ms, 20, 6, ms)    // spends 6 at the bucket's start
	e.ApplyCount("g/r", "k", 9, ms, 20, 6, ms)    // an unknown slot: ignored
	e.ApplyCount("x/none", "k", 0, ms, 20, 6, ms) // an unknown resource: ignored
	d, _ := e.Request(time.UnixMilli(ms), "g/r", "k", 0, 0)
	if d.Remaining != 4 {
		t.Fatalf("remaining %d, want 4", d.Remaining)
	}
	e.ApplyCount("g/r", "k", 1, ms, 20, 2, ms) // a refund of 2
	d, _ = e.Request(time.UnixMilli(ms), "g/r", "k", 0, 0)
	if d.Remaining != 6 {
		t.Fatalf("remaining after refund %d, want 6", d.Remaining)
	}
	// Spends long past refilled: nothing is kept.
	e.ApplyCount("g/r", "old", 0, ms-10_000, 20, 3, ms)
	if e.Keys("g/r") != 1 {
		t.Fatalf("keys %d, want 1 (a spend already refilled adds no key)", e.Keys("g/r"))
	}
}

func TestRemoteHoldsCountAgainstEveryLimit(t *testing.T) {
	e := New(peerCfg())
	tt := at(0)
	sess, _ := e.OpenSession(tt, time.Minute)
	e.AddRemoteHolds("c/r", "a", 2)
	e.AddRemoteHolds("c/r", "zz", 1)
	r, _ := e.Reserve(tt, "c/r", "a", 3, 1, sess)
	if r.Granted != 1 || r.DomainHolds != 3 || r.GlobalHolds != 4 || r.Groups[0].Holds != 3 {
		t.Fatalf("reserve: %+v", r)
	}
	r, _ = e.Reserve(tt, "c/r", "b", 3, 1, sess) // group big: 4 − 3 = 1 left
	if r.Granted != 1 {
		t.Fatalf("reserve b: %+v", r)
	}
	e.AddRemoteHolds("c/r", "a", -5) // more than held: floors at zero
	r, _ = e.Reserve(tt, "c/r", "a", 3, 1, sess)
	// a: limit 3 − 1 held; global 5 − (2 local + 1 zz); group 4 − 2: 2.
	if r.Granted != 2 || r.GlobalHolds != 5 {
		t.Fatalf("after the peer let go: %+v", r)
	}
	var seen int64
	e.EachHold(func(res, dom string, n int64) { seen += n })
	if seen != 4 {
		t.Fatalf("EachHold reports %d local holds, want 4 (peers' excluded)", seen)
	}
}

// TestGCRAPeerSpendInPartsKeepsItsKey: a peer's burst of spends shipped in
// parts, each placed at its bucket's start (here 53.8 s before it lands,
// on a limit of 1,000 an hour: a minute's bucket), must add up. Each part
// alone has refilled by the time it lands; the key used to be dropped
// after each, so every part started from a full bucket and all 18 spends
// were lost; the key is now kept a bucket longer.
func TestGCRAPeerSpendInPartsKeepsItsKey(t *testing.T) {
	cfg := &config.Config{Resources: map[string]*config.Resource{
		"g/h": {Kind: config.KindGCRA, Burst: 1000, Count: 1000, Period: time.Hour},
	}}
	e := New(normal(cfg))
	gr := e.res["g/h"].k.(*gcraRes)
	gr.idle = newStore[idleLog](100) // clustered, as attach makes it
	b := int64(1_795_817_220_000)    // a bucket's start, ms
	now := b + 53_800
	for range 3 {
		e.ApplyCount("g/h", "u", SlotSpend, b, 60_000, 6, now)
	}
	// The 18 spends at b: TAT b + 64.8 s, and 53.8 s of it passed.
	d, _ := e.Request(time.UnixMilli(now), "g/h", "u", 0, 0)
	if d.Remaining != 996 {
		t.Fatalf("remaining %d after three parts of 6 spends, want 996 (all 18 counted)", d.Remaining)
	}
	// The key outlives its TAT by idleKeep and the bucket, no longer.
	gr.sweep(time.UnixMilli(b + 64_800 + 89_000))
	if e.Keys("g/h") != 1 {
		t.Fatalf("keys %d after 89 s past the TAT, want 1", e.Keys("g/h"))
	}
	gr.sweep(time.UnixMilli(b + 64_800 + 90_000))
	if e.Keys("g/h") != 0 {
		t.Fatalf("keys %d 90 s past the TAT, want 0", e.Keys("g/h"))
	}
}
