package config

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/adaptive"
)

// The tests of this file hold each per-kind parameter to its one owner:
// normalization fills every default (TestNormalizeFillsEachDefault), and
// validation refuses every out-of-bound value with its message
// (TestOutOfBoundMessages).

// TestNormalizeFillsEachDefault: a resource that leaves a parameter out
// has its default after ParseResource, the same value as package
// adaptive's Default… constant where the kind is adaptive's, and a
// parameter its pacer strategy does not read stays unset.
func TestNormalizeFillsEachDefault(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		got       func(r *Resource) any
		want      any
	}{
		{"drift", `{kind: gcra, burst: 1, count: 1, period: 1s}`, func(r *Resource) any { return *r.Drift }, 0.05},
		{"max_keys", `{kind: gcra, burst: 1, count: 1, period: 1s}`, func(r *Resource) any { return r.MaxKeys }, 1_000_000},
		{"tiers max_keys", `{kind: tiers, tiers: []}`, func(r *Resource) any { return r.MaxKeys }, 1_000_000},
		{"copies max_keys", `{kind: copies}`, func(r *Resource) any { return r.MaxKeys }, 1_000_000},

		{"grow_every", `{kind: adaptive, min_window: 1, max_window: 2}`, func(r *Resource) any { return r.GrowEvery }, 10},
		{"margin", `{kind: adaptive, min_window: 1, max_window: 2}`, func(r *Resource) any { return r.Margin }, 10},
		{"timeout", `{kind: adaptive, min_window: 1, max_window: 2}`, func(r *Resource) any { return r.Timeout }, 30 * time.Second},
		{"rules", `{kind: adaptive, min_window: 1, max_window: 2}`, func(r *Resource) any { return r.Rules }, RulesOpenZiti},
		{"client_share", `{kind: adaptive, min_window: 1, max_window: 2}`, func(r *Resource) any { return *r.ClientShare }, 1.0},
		{"grow_every set", `{kind: adaptive, min_window: 1, max_window: 2, grow_every: 3}`, func(r *Resource) any { return r.GrowEvery }, 3},

		{"strategy", `{kind: pacer, quota: 4500, period: 1h}`, func(r *Resource) any { return r.Strategy }, StrategyKeepReserve},
		{"jitter", `{kind: pacer, quota: 4500, period: 1h}`, func(r *Resource) any { return *r.Jitter }, 0.1},
		{"jitter 0 stays", `{kind: pacer, quota: 4500, period: 1h, jitter: 0}`, func(r *Resource) any { return *r.Jitter }, 0.0},
		{"keep_reserve: no min_sleep", `{kind: pacer, quota: 4500, period: 1h}`, func(r *Resource) any { return r.MinSleep }, time.Duration(0)},
		{"keep_reserve: no multiplier", `{kind: pacer, quota: 4500, period: 1h}`, func(r *Resource) any { return r.Multiplier }, 0.0},
		{"keep_reserve: start_sleep", `{kind: pacer, quota: 4500, period: 1h}`, func(r *Resource) any { return r.StartSleep }, time.Duration(0)},
		{"exponential_backoff: min_sleep", `{kind: pacer, quota: 4500, period: 1h, strategy: exponential_backoff}`,
			func(r *Resource) any { return r.MinSleep }, 800 * time.Millisecond},
		{"exponential_backoff: multiplier", `{kind: pacer, quota: 4500, period: 1h, strategy: exponential_backoff}`,
			func(r *Resource) any { return r.Multiplier }, 1.2},
		{"proportional_remaining: min_sleep", `{kind: pacer, quota: 100, period: 1m, strategy: proportional_remaining}`,
			func(r *Resource) any { return r.MinSleep }, 600 * time.Millisecond},
		{"proportional_remaining: multiplier", `{kind: pacer, quota: 100, period: 1m, strategy: proportional_remaining}`,
			func(r *Resource) any { return r.Multiplier }, 1.2},
		{"min_sleep set", `{kind: pacer, quota: 100, period: 1m, strategy: proportional_remaining, min_sleep: 2s}`,
			func(r *Resource) any { return r.MinSleep }, 2 * time.Second},
		{"multiplier set", `{kind: pacer, quota: 100, period: 1m, strategy: exponential_backoff, multiplier: 1.5}`,
			func(r *Resource) any { return r.Multiplier }, 1.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseResource([]byte(tc.src))
			if err != nil {
				t.Fatalf("ParseResource(%s): %v", tc.src, err)
			}
			if got := tc.got(r); got != tc.want {
				t.Errorf("%s: got %v (%T), want %v (%T)", tc.src, got, got, tc.want, tc.want)
			}
		})
	}
}

// TestOutOfBoundMessages: each per-kind parameter just past each of its
// bounds is refused with exactly this message, path included (the texts
// are part of the contract).
func TestOutOfBoundMessages(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		// common
		{`{kind: gcra, burst: 1, count: 1, period: 1s, drift: -0.1}`, `resource.drift: must be in [0, 1] (absent means 0.05, 0 ships every hit at once), got -0.1`},
		{`{kind: gcra, burst: 1, count: 1, period: 1s, drift: 1.5}`, `resource.drift: must be in [0, 1] (absent means 0.05, 0 ships every hit at once), got 1.5`},
		{`{kind: gcra, burst: 1, count: 1, period: 1s, max_keys: -1}`, `resource.max_keys: must be ≥ 0, got -1`},
		{`{kind: gcra, burst: 1, count: 1, period: 1s, max_keys: 1000000001}`, `resource.max_keys: must be ≤ 1000000000, got 1000000001`},
		// tiers
		{`{kind: tiers, tiers: [{limit: 0, window: 1s, active: 1s}]}`, `resource.tiers[0].limit: must be ≥ 1, got 0`},
		{`{kind: tiers, tiers: [{limit: 1000000001, window: 1s, active: 1s}]}`, `resource.tiers[0].limit: must be ≤ 1000000000, got 1000000001`},
		{`{kind: tiers, tiers: "-99999999999999999999,1,1,0"}`, `resource.tiers[0].limit: must be ≥ 1, got -99999999999999999999`},
		{`{kind: tiers, tiers: "1000000001,1,1,0"}`, `resource.tiers[0].limit: must be ≤ 1000000000, got 1000000001`},
		{`{kind: tiers, tiers: [{limit: 1, window: 0s, active: 1s}]}`, `resource.tiers[0].window: must be > 0, got 0s`},
		{`{kind: tiers, tiers: [{limit: 1, window: 1s, active: -1s}]}`, `resource.tiers[0].active: must be ≥ 0, got -1s`},
		{`{kind: tiers, tiers: [{limit: 1, window: 1s, active: 1s, cooldown: -1s}]}`, `resource.tiers[0].cooldown: must be ≥ 0, got -1s`},
		{`{kind: tiers, tiers: [{limit: 1, window: 1500us, active: 3ms}]}`, `resource.tiers[0].window: must be a whole number of milliseconds, got 1.5ms`},
		{`{kind: tiers, tiers: [], hard_limit: -1}`, `resource.hard_limit: must be ≥ 0, got -1`},
		{`{kind: tiers, tiers: [], global_limit: 1000000001}`, `resource.global_limit: must be ≤ 1000000000, got 1000000001`},
		// gcra
		{`{kind: gcra, burst: 0, count: 1, period: 1s}`, `resource.burst: must be ≥ 1, got 0`},
		{`{kind: gcra, burst: 1, count: 0, period: 1s}`, `resource.count: must be ≥ 1, got 0`},
		{`{kind: gcra, burst: 1, count: 1, period: 0s}`, `resource.period: must be > 0, got 0s`},
		{`{kind: gcra, burst: 1, count: 2, period: 1ns}`, `resource.period: period/count must be at least 1ns, got 1ns/2 (count at most 1 for this period)`},
		{`{kind: gcra, burst: 1000000000, count: 1, period: 876000h}`, `resource.burst: burst·period/count must be ≤ 876000h0m0s (100 years), got 1000000000·876000h0m0s`},
		// copies
		{`{kind: copies, domain_limit: -1}`, `resource.domain_limit: must be ≥ 0, got -1`},
		{`{kind: copies, groups: [{name: g, limit: -1, domains: [a]}]}`, `resource.groups[0].limit: must be ≥ 0, got -1`},
		// adaptive
		{`{kind: adaptive, min_window: 0, max_window: 2}`, `resource.min_window: must be ≥ 1, got 0`},
		{`{kind: adaptive, min_window: 1000000001, max_window: 1000000001}`, "resource.max_window: must be ≤ 1000000000, got 1000000001\nresource.min_window: must be ≤ 1000000000, got 1000000001"},
		{`{kind: adaptive, min_window: 3, max_window: 2}`, `resource.max_window: must be ≥ min_window (3), got 2`},
		{`{kind: adaptive, min_window: 1, max_window: 1000000001}`, `resource.max_window: must be ≤ 1000000000, got 1000000001`},
		{`{kind: adaptive, min_window: 1, max_window: 2, grow_every: -1}`, `resource.grow_every: must be ≥ 0, got -1`},
		{`{kind: adaptive, min_window: 1, max_window: 2, margin: -1}`, `resource.margin: must be ≥ 0, got -1`},
		{`{kind: adaptive, min_window: 1, max_window: 2, timeout: -1s}`, `resource.timeout: must be ≥ 0, got -1s`},
		{`{kind: adaptive, min_window: 1, max_window: 2, timeout: 61m}`, `resource.timeout: must be ≤ 1h0m0s (a ticket nobody completes holds its place in the window that long), got 1h1m0s`},
		{`{kind: adaptive, min_window: 1, max_window: 2, rules: fast}`, `resource.rules: must be one of openziti or predictive, got "fast"`},
		{`{kind: adaptive, min_window: 1, max_window: 2, client_share: 0}`, `resource.client_share: must be in (0, 1] (absent means 1: no bound per client), got 0`},
		{`{kind: adaptive, min_window: 1, max_window: 2, client_share: 1.5}`, `resource.client_share: must be in (0, 1] (absent means 1: no bound per client), got 1.5`},
		// pacer
		{`{kind: pacer, quota: 0, period: 1h}`, `resource.quota: must be ≥ 1, got 0`},
		{`{kind: pacer, quota: 1000000001, period: 1h}`, `resource.quota: must be ≤ 1000000000, got 1000000001`},
		{`{kind: pacer, quota: 1, period: -1s}`, `resource.period: must be > 0, got -1s`},
		{`{kind: pacer, quota: 1, period: 1h, strategy: fast}`, `resource.strategy: must be one of keep_reserve, exponential_backoff or proportional_remaining, got "fast"`},
		{`{kind: pacer, quota: 1, period: 1h, strategy: exponential_backoff, min_sleep: -1s}`, `resource.min_sleep: must be ≥ 0, got -1s`},
		{`{kind: pacer, quota: 1, period: 1h, strategy: exponential_backoff, multiplier: 0.5}`, `resource.multiplier: must be a number ≥ 1 (0 means 1.2), got 0.5`},
		{`{kind: pacer, quota: 1, period: 1h, strategy: exponential_backoff, multiplier: .inf}`, `resource.multiplier: must be a number ≥ 1 (0 means 1.2), got +Inf`},
		{`{kind: pacer, quota: 1, period: 1h, jitter: -0.1}`, `resource.jitter: must be in [0, 1] (absent means 0.1, 0 none), got -0.1`},
		{`{kind: pacer, quota: 1, period: 1h, jitter: 1.5}`, `resource.jitter: must be in [0, 1] (absent means 0.1, 0 none), got 1.5`},
		{`{kind: pacer, quota: 1, period: 1h, start_sleep: -1s}`, `resource.start_sleep: must be ≥ 0, got -1s`},
		{`{kind: pacer, quota: 1, period: 1h, multiplier: 2}`, `resource.multiplier: not read by strategy keep_reserve (multiplier is for strategy exponential_backoff and proportional_remaining): leave it out`},
	} {
		_, err := ParseResource([]byte(tc.src))
		if err == nil {
			t.Errorf("%s: accepted, want %q", tc.src, tc.want)
			continue
		}
		if got := err.Error(); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.src, got, tc.want)
		}
	}
}

// FuzzValidIsValidForAdaptive: a resource of kind adaptive or pacer that
// validation accepts translates, once normalized, into a config that
// package adaptive's Validate accepts as well, so the engine hands it over
// without clamping anything; and an adaptive one has every default adaptive
// would fill in already filled in (WithDefaults changes none of its
// parameters). The seeds sit on each bound.
func FuzzValidIsValidForAdaptive(f *testing.F) {
	for _, s := range []struct {
		minW, maxW, grow, margin int
		timeout                  time.Duration
		rules                    uint8
		quota                    int
		period                   time.Duration
		strategy                 uint8
		minSleep                 time.Duration
		mult, jitter             float64
		jitterSet                bool
		start                    time.Duration
	}{
		{1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, false, 0},
		{1, 2, 1, 1, 1, 1, 4500, time.Hour, 1, 1, 1, 0, true, 1},
		{5, 250, 10, 10, 30 * time.Second, 2, 100, time.Minute, 2, time.Second, 1.5, 1, true, time.Second},
		{1_000_000_000, 1_000_000_000, 1_000_000_000, 1_000_000_000, time.Hour, 1, 1_000_000_000, MaxDuration, 1, MaxDuration, 1e300, 0.5, true, MaxDuration},
		{0, 0, -1, -1, -1, 3, 0, 0, 3, -1, 0.5, 2, true, -1},
		{1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, true, 0},
	} {
		f.Add(s.minW, s.maxW, s.grow, s.margin, int64(s.timeout), s.rules, s.quota, int64(s.period), s.strategy, int64(s.minSleep), s.mult, s.jitter, s.jitterSet, int64(s.start))
	}
	rulesOf := []Rules{"", RulesOpenZiti, RulesPredictive, "other"}
	strategyOf := []Strategy{"", StrategyKeepReserve, StrategyExponentialBackoff, StrategyProportionalRemaining, "other"}
	f.Fuzz(func(t *testing.T, minW, maxW, grow, margin int, timeout int64, rules uint8, quota int, period int64, strategy uint8, minSleep int64, mult, jitter float64, jitterSet bool, start int64) {
		a := &Resource{Kind: KindAdaptive, MinWindow: minW, MaxWindow: maxW, GrowEvery: grow, Margin: margin,
			Timeout: time.Duration(timeout), Rules: rulesOf[int(rules)%len(rulesOf)]}
		if a.Validate() == nil {
			a.Normalize()
			c := a.AdaptiveConfig()
			if err := c.Validate(); err != nil {
				t.Errorf("%+v: config accepts it, adaptive refuses %+v: %v", *a, c, err)
			}
			if d := c.WithDefaults(); d.GrowEvery != c.GrowEvery || d.Margin != c.Margin || d.Timeout != c.Timeout {
				t.Errorf("%+v: normalized, still has defaults to fill: %+v → %+v", *a, c, d)
			}
		}
		p := &Resource{Kind: KindPacer, Quota: quota, Period: time.Duration(period), Strategy: strategyOf[int(strategy)%len(strategyOf)],
			MinSleep: time.Duration(minSleep), Multiplier: mult, StartSleep: time.Duration(start)}
		if jitterSet {
			p.Jitter = Fraction(jitter)
		}
		if p.Validate() == nil {
			p.Normalize()
			if c := p.PacerConfig(); c.Validate() != nil {
				t.Errorf("%+v: config accepts it, adaptive refuses %+v: %v", *p, c, c.Validate())
			}
		}
	})
}

// TestDocumentedDefaults: where the commented default config and the docs
// give a parameter's default, it is the one definition's value.
func TestDocumentedDefaults(t *testing.T) {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	yaml, adaptiveDoc, semantics := string(DefaultYAML()), read("../docs/adaptive.md"), read("../docs/semantics.md")
	for _, tc := range []struct{ where, text, want string }{
		{"default.yaml", yaml, fmt.Sprintf("# grow_every: %d ", adaptive.DefaultGrowEvery)},
		{"default.yaml", yaml, fmt.Sprintf("(0 = %d)\n    # margin: %d ", adaptive.DefaultGrowEvery, adaptive.DefaultMargin)},
		{"default.yaml", yaml, fmt.Sprintf("(0 = %d)\n    # timeout: %v ", adaptive.DefaultMargin, adaptive.DefaultTimeout)},
		{"default.yaml", yaml, fmt.Sprintf("(0 = %v)\n", adaptive.DefaultTimeout)},
		{"default.yaml", yaml, fmt.Sprintf("# jitter: %v ", adaptive.DefaultJitter)},
		{"docs/adaptive.md", adaptiveDoc, fmt.Sprintf("every `grow_every` (%d) successes", adaptive.DefaultGrowEvery)},
		{"docs/adaptive.md", adaptiveDoc, fmt.Sprintf("(margin %d)", adaptive.DefaultMargin)},
		{"docs/adaptive.md", adaptiveDoc, fmt.Sprintf("# jitter: %v ", adaptive.DefaultJitter)},
		{"docs/adaptive.md", adaptiveDoc, fmt.Sprintf("(absent = %v, 0 = none)", adaptive.DefaultJitter)},
		{"docs/adaptive.md", adaptiveDoc, fmt.Sprintf("# multiplier: %v ", adaptive.DefaultMultiplier)},
		{"docs/adaptive.md", adaptiveDoc, fmt.Sprintf("growth per 429 (0 = %v)", adaptive.DefaultMultiplier)},
		{"docs/semantics.md", semantics, fmt.Sprintf("`drift` left out is %v;", DefaultDrift)},
		{"docs/semantics.md", semantics, fmt.Sprintf("`max_keys` keys (default %d,%03d,%03d)", DefaultMaxKeys/1_000_000, DefaultMaxKeys/1000%1000, DefaultMaxKeys%1000)},
	} {
		if !strings.Contains(tc.text, tc.want) {
			t.Errorf("%s does not say %q", tc.where, tc.want)
		}
	}
}
