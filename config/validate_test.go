package config

import (
	"strings"
	"testing"
	"time"
)

func TestValidateBuiltInGo(t *testing.T) {
	tests := []struct {
		name string
		c    *Config
		want []string // every problem, "path: fragment"
	}{
		{name: "nil", c: nil},
		{name: "zero", c: &Config{}},
		{name: "nil resource", c: &Config{Resources: map[string]*Resource{"a/b": nil}},
			want: []string{`resources["a/b"]: must be a mapping, got null`}},
		{name: "nil override", c: &Config{Resources: map[string]*Resource{"a/b": {Kind: KindCopies, Domains: map[string]*Override{"x": nil}}}},
			want: []string{`resources["a/b"].domains["x"]: must be a mapping`}},
		{name: "gcra required fields read as zero", c: &Config{Resources: map[string]*Resource{"a/b": {Kind: KindGCRA}}},
			want: []string{
				`resources["a/b"].burst: must be ≥ 1, got 0`,
				`resources["a/b"].count: must be ≥ 1, got 0`,
				`resources["a/b"].period: must be > 0, got 0s`,
			}},
		{name: "fields of other kinds", c: &Config{Resources: map[string]*Resource{"a/b": {Kind: KindAdaptive, MinWindow: 1, MaxWindow: 1, HardLimit: Limit(3), Groups: []Group{{Name: "g", Domains: []string{"x"}}}}}},
			want: []string{
				`resources["a/b"].groups: not a field of kind adaptive (groups is for kind copies)`,
				`resources["a/b"].hard_limit: not a field of kind adaptive (hard_limit is for kind tiers)`,
			}},
		{name: "global_limit names both kinds", c: &Config{Resources: map[string]*Resource{"a/b": {Kind: KindGCRA, Burst: 1, Count: 1, Period: 1, GlobalLimit: Limit(3)}}},
			want: []string{`resources["a/b"].global_limit: not a field of kind gcra (global_limit is for kind tiers and copies)`}},
		{name: "override field of another kind", c: &Config{Resources: map[string]*Resource{"a/b": {Kind: KindCopies, Domains: map[string]*Override{"x": {DomainLimit: Limit(1), HardLimit: Limit(2)}}}}},
			want: []string{`resources["a/b"].domains["x"].hard_limit: not a field of a copies override (a copies override sets domain_limit)`}},
		{name: "unknown kind checks only what is set", c: &Config{Resources: map[string]*Resource{"a/b": {Kind: "bucket", Burst: -1}}},
			want: []string{
				`resources["a/b"].burst: must be ≥ 1, got -1`,
				`resources["a/b"].kind: must be one of tiers, gcra, copies, adaptive or pacer, got "bucket"`,
			}},
		{name: "pacer built in Go: every problem at once", c: &Config{Resources: map[string]*Resource{"a/b": {Kind: KindPacer, Strategy: "aimd", Multiplier: 0.5, Jitter: Fraction(-1), MinSleep: -time.Second, Shadow: true}}},
			want: []string{
				`resources["a/b"].jitter: must be in [0, 1] (absent means 0.1, 0 none), got -1`,
				`resources["a/b"].min_sleep: must be ≥ 0, got -1s`,
				`resources["a/b"].multiplier: must be a number ≥ 1 (0 means 1.2), got 0.5`,
				`resources["a/b"].period: must be > 0, got 0s`,
				`resources["a/b"].quota: must be ≥ 1, got 0`,
				`resources["a/b"].shadow: kind pacer has no shadow mode`,
				`resources["a/b"].strategy: must be one of keep_reserve, exponential_backoff or proportional_remaining, got "aimd"`,
			}},
		{name: "pacer fields its strategy ignores", c: &Config{Resources: map[string]*Resource{"a/b": {Kind: KindPacer, Quota: 1, Period: time.Hour, Multiplier: 2, MinSleep: time.Second}}},
			want: []string{
				`resources["a/b"].min_sleep: not read by strategy keep_reserve`,
				`resources["a/b"].multiplier: not read by strategy keep_reserve`,
			}},
		{name: "rules built in Go", c: &Config{Resources: map[string]*Resource{"a/b": {Kind: KindAdaptive, MinWindow: 1, MaxWindow: 1, Rules: "Predictive"}}},
			want: []string{`resources["a/b"].rules: must be one of openziti or predictive, got "Predictive" (did you mean "predictive"?)`}},
		{name: "invalid UTF-8", c: &Config{Resources: map[string]*Resource{"a/\xff": {Kind: KindTiers}}},
			want: []string{`resources["a/\xff"]: resource name must be valid UTF-8`}},
		{name: "tier limit above 1e9 and window above 100 years", c: &Config{Resources: map[string]*Resource{"a/b": {Kind: KindTiers, Tiers: []Tier{{Limit: 2e9, Window: MaxDuration + time.Millisecond, Active: MaxDuration + time.Millisecond}}}}},
			want: []string{
				`resources["a/b"].tiers[0].active: must be ≤ 876000h0m0s (100 years)`,
				`resources["a/b"].tiers[0].limit: must be ≤ 1000000000, got 2000000000`,
				`resources["a/b"].tiers[0].window: must be ≤ 876000h0m0s (100 years)`,
			}},
		{name: "tier durations finer than a millisecond", c: &Config{Resources: map[string]*Resource{"a/b": {Kind: KindTiers, Tiers: []Tier{{Limit: 1, Window: 1500 * time.Microsecond, Active: 3 * time.Millisecond, Cooldown: time.Nanosecond}}}}},
			want: []string{
				`resources["a/b"].tiers[0].cooldown: must be a whole number of milliseconds, got 1ns`,
				`resources["a/b"].tiers[0].window: must be a whole number of milliseconds, got 1.5ms`,
			}},
		{name: "empty join entry", c: &Config{Gossip: Gossip{Join: []string{"a", ""}}},
			want: []string{`gossip.join[1]: must not be empty`}},
		{name: "empty namespace name", c: &Config{Namespaces: map[string]*Namespace{"": {}}},
			want: []string{`namespaces[""]: namespace name must not be empty`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			ps := problemsOf(t, err)
			if len(ps) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(tt.want), err)
			}
			for i, p := range ps {
				if !strings.HasPrefix(p.String(), tt.want[i]) {
					t.Errorf("problem %d = %q\nwant prefix     %q", i, p.String(), tt.want[i])
				}
			}
		})
	}
}

func TestResourceValidate(t *testing.T) {
	r := &Resource{Kind: KindTiers, Tiers: []Tier{{Limit: 0, Window: time.Second, Active: time.Second}}}
	ps := problemsOf(t, r.Validate())
	if len(ps) != 1 || ps[0].String() != "resource.tiers[0].limit: must be ≥ 1, got 0" {
		t.Errorf("Validate = %v", ps)
	}
	var nilr *Resource
	if err := nilr.Validate(); err == nil {
		t.Error("nil resource is valid")
	}
	if err := (&Resource{Kind: KindTiers}).Validate(); err != nil {
		t.Errorf("a tiers resource with no tiers (rejects everything) is valid, got %v", err)
	}
}

func TestSplitName(t *testing.T) {
	for _, tt := range []struct {
		in, ns, name string
		ok           bool
	}{
		{in: "api/search", ns: "api", name: "search", ok: true},
		{in: "api/v2/search", ns: "api", name: "v2/search", ok: true},
		{in: "search", ns: "", name: "", ok: false},
		{in: "/search", ns: "", name: "", ok: false},
		{in: "api/", ns: "", name: "", ok: false},
	} {
		ns, name, ok := SplitName(tt.in)
		if ns != tt.ns || name != tt.name || ok != tt.ok {
			t.Errorf("SplitName(%q) = %q, %q, %v", tt.in, ns, name, ok)
		}
	}
}
