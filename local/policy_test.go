package local

import (
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

// TestPolicyFigures checks a Decision's RateLimit figures (PolicyTier, the
// remaining and refill of each policy) on fixed instants: every case
// spends some hits, then asks once and reads the figures of that answer.
func TestPolicyFigures(t *testing.T) {
	const ms = time.Millisecond
	type hit struct {
		at     int // ms after t0
		domain string
		copies int
	}
	for _, tc := range []struct {
		name     string
		resource string // YAML of z/r
		spend    []hit
		ask      hit // copies 0 is a peek
		// what the answer says
		granted                 int
		tier, tierLeft          int
		tierRefill              time.Duration
		hardRefill, globRefill  time.Duration
		gcraRefill, retry       time.Duration
		domainHits, globalHits  int
		checkRetry, checkGlobal bool
	}{
		{name: "fresh domain: tier 1 and its window",
			resource: `{kind: tiers, tiers: "5,1,1,0,50,5,5,15", hard_limit: 100}`,
			ask:      hit{0, "d", 0},
			tier:     1, tierLeft: 5, tierRefill: time.Second, hardRefill: time.Second},
		{name: "in tier 1, its first hit leaves with the instance",
			resource: `{kind: tiers, tiers: "5,1,1,0,50,5,5,15", hard_limit: 100}`,
			spend:    []hit{{0, "d", 1}},
			ask:      hit{400, "d", 0},
			tier:     1, tierLeft: 4, tierRefill: 600 * ms, hardRefill: 600 * ms, domainHits: 1},
		{name: "window shorter than active: the oldest hit leaves first",
			resource: `{kind: tiers, tiers: "5,1,3,0"}`,
			spend:    []hit{{0, "d", 2}, {300, "d", 3}},
			ask:      hit{500, "d", 0},
			tier:     1, tierLeft: 0, tierRefill: 500 * ms, retry: 500 * ms, checkRetry: true, domainHits: 5},
		{name: "after a burst: tier 2 until its cooldown ends",
			resource: `{kind: tiers, tiers: "5,1,1,0,50,5,5,15", hard_limit: 100}`,
			spend:    []hit{{0, "d", 6}},
			ask:      hit{0, "d", 0},
			tier:     2, tierLeft: 49, tierRefill: 20 * time.Second, hardRefill: time.Second, domainHits: 6},
		{name: "both tiers spent: tier 2's refill is past the retry",
			resource: `{kind: tiers, tiers: "5,1,1,0,50,5,5,15"}`,
			spend:    []hit{{0, "d", 55}},
			ask:      hit{1000, "d", 1},
			tier:     2, tierLeft: 0, tierRefill: 19 * time.Second, retry: 4 * time.Second, checkRetry: true, domainHits: 0},
		{name: "tier 2 cooling down: tier 1 afresh",
			resource: `{kind: tiers, tiers: "5,1,1,0,50,5,5,15"}`,
			spend:    []hit{{0, "d", 6}},
			ask:      hit{6000, "d", 0},
			tier:     1, tierLeft: 5, tierRefill: time.Second},
		{name: "a skippable tier cooling down is passed over",
			resource: `{kind: tiers, tiers: [{limit: 5, window: 1s, active: 1s}, {limit: 2, window: 1s, active: 1s, cooldown: 10s, skippable: true}, {limit: 3, window: 2s, active: 2s}]}`,
			spend:    []hit{{0, "d", 7}},
			ask:      hit{1500, "d", 0},
			tier:     3, tierLeft: 3, tierRefill: 2 * time.Second},
		{name: "a fresh tier with less room than the current one wins",
			resource: `{kind: tiers, tiers: [{limit: 10, window: 1s, active: 1s}, {limit: 2, window: 3s, active: 3s}]}`,
			spend:    []hit{{0, "d", 1}},
			ask:      hit{0, "d", 0},
			tier:     2, tierLeft: 2, tierRefill: 3 * time.Second, domainHits: 1},
		{name: "every tier cooling down: the blocking one, until its cooldown ends",
			resource: `{kind: tiers, tiers: "50,15,15,30"}`,
			spend:    []hit{{0, "d", 50}},
			ask:      hit{20_000, "d", 1},
			tier:     1, tierLeft: 0, tierRefill: 25 * time.Second, retry: 25 * time.Second, checkRetry: true},
		{name: "no tier at all",
			resource: `{kind: tiers, tiers: [], hard_limit: 3}`,
			ask:      hit{0, "d", 1},
			tier:     0, tierLeft: 0, tierRefill: 0, hardRefill: time.Second, retry: Never, checkRetry: true},
		{name: "hard limit binding",
			resource: `{kind: tiers, tiers: "50,1,1,0", hard_limit: 3}`,
			spend:    []hit{{0, "d", 2}, {100, "d", 1}},
			ask:      hit{200, "d", 1},
			tier:     1, tierLeft: 47, tierRefill: 800 * ms, hardRefill: 800 * ms, retry: 800 * ms, checkRetry: true, domainHits: 3},
		{name: "hard limit of 0 never refills",
			resource: `{kind: tiers, tiers: "5,1,1,0", hard_limit: 0}`,
			ask:      hit{0, "d", 1},
			tier:     1, tierLeft: 5, tierRefill: time.Second, hardRefill: Never, retry: Never, checkRetry: true},
		{name: "global limit binding: its oldest hit, another domain's",
			resource: `{kind: tiers, tiers: "50,1,1,0", global_limit: 2}`,
			spend:    []hit{{0, "a", 1}, {300, "b", 1}},
			ask:      hit{400, "b", 0},
			tier:     1, tierLeft: 49, tierRefill: 900 * ms, globRefill: 600 * ms, checkGlobal: true,
			domainHits: 1, globalHits: 2},
		{name: "global refill not computed while the tier has less left",
			resource: `{kind: tiers, tiers: "1,1,1,0", global_limit: 100}`,
			ask:      hit{0, "d", 0},
			tier:     1, tierLeft: 1, tierRefill: time.Second, globRefill: 0, checkGlobal: true},
		{name: "global refill of an empty second is a second",
			resource: `{kind: tiers, tiers: "50,1,1,0", global_limit: 2}`,
			ask:      hit{0, "d", 0},
			tier:     1, tierLeft: 50, tierRefill: time.Second, globRefill: time.Second, checkGlobal: true},
		{name: "global limit of 0 never refills",
			resource: `{kind: tiers, tiers: "5,1,1,0", global_limit: 0}`,
			ask:      hit{0, "d", 0},
			tier:     1, tierLeft: 5, tierRefill: time.Second, globRefill: Never, checkGlobal: true},
		{name: "gcra full bucket: one emission interval",
			resource:   `{kind: gcra, burst: 20, count: 20, period: 1s}`,
			ask:        hit{0, "d", 0},
			gcraRefill: 50 * ms},
		{name: "gcra part spent",
			resource:   `{kind: gcra, burst: 20, count: 20, period: 1s}`,
			spend:      []hit{{0, "d", 1}},
			ask:        hit{10, "d", 0},
			gcraRefill: 40 * ms},
		{name: "gcra empty: the next token",
			resource:   `{kind: gcra, burst: 20, count: 20, period: 1s}`,
			spend:      []hit{{0, "d", 20}},
			ask:        hit{30, "d", 1},
			gcraRefill: 20 * ms, retry: 20 * ms, checkRetry: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse([]byte("resources: {z/r: " + tc.resource + "}"))
			if err != nil {
				t.Fatalf("%s: %v", tc.resource, err)
			}
			e := New(c)
			for _, h := range tc.spend {
				if d, err := e.Request(at(h.at), "z/r", h.domain, h.copies, h.copies); err != nil || d.Granted != h.copies {
					t.Fatalf("spending %+v: %+v, %v", h, d, err)
				}
			}
			d, err := e.Request(at(tc.ask.at), "z/r", tc.ask.domain, tc.ask.copies, tc.ask.copies)
			if err != nil {
				t.Fatal(err)
			}
			if d.Granted != tc.granted {
				t.Errorf("granted %d, want %d", d.Granted, tc.granted)
			}
			if d.Kind == config.KindGCRA {
				if d.GCRARefill != tc.gcraRefill {
					t.Errorf("GCRARefill %v, want %v", d.GCRARefill, tc.gcraRefill)
				}
			} else {
				got := [3]any{d.PolicyTier, d.PolicyTierRemaining, d.PolicyTierRefill}
				if want := [3]any{tc.tier, tc.tierLeft, tc.tierRefill}; got != want {
					t.Errorf("PolicyTier, PolicyTierRemaining, PolicyTierRefill = %v, want %v", got, want)
				}
				if d.HardRefill != tc.hardRefill {
					t.Errorf("HardRefill %v, want %v", d.HardRefill, tc.hardRefill)
				}
				if d.DomainHitsLastSecond != tc.domainHits {
					t.Errorf("DomainHitsLastSecond %d, want %d", d.DomainHitsLastSecond, tc.domainHits)
				}
				if tc.checkGlobal && (d.GlobalRefill != tc.globRefill || d.GlobalHitsLastSecond != tc.globalHits) {
					t.Errorf("GlobalRefill %v, GlobalHitsLastSecond %d; want %v, %d",
						d.GlobalRefill, d.GlobalHitsLastSecond, tc.globRefill, tc.globalHits)
				}
			}
			if tc.checkRetry && d.RetryAfter != tc.retry {
				t.Errorf("RetryAfter %v, want %v", d.RetryAfter, tc.retry)
			}
		})
	}
}
