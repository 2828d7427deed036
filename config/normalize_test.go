package config

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestNormalizeTiers(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name string
		in   []Tier
		want []Tier
	}{
		{
			// docs/semantics.md: "1. tiers with `active = 0` are removed;"
			name: "rule 1: active 0 removed",
			in:   []Tier{{Limit: 1, Window: s, Active: 0}, {Limit: 2, Window: s, Active: s}, {Limit: 3, Window: s, Active: 0, Cooldown: s}},
			want: []Tier{{Limit: 2, Window: s, Active: s}},
		},
		{
			// docs/semantics.md: "1. tiers with `active = 0` are removed;" — all of them: n = 0.
			name: "rule 1: every tier removed leaves none",
			in:   []Tier{{Limit: 1, Window: s}},
			want: nil,
		},
		{
			// docs/semantics.md: "2. `window > active` → `window = active`;"
			name: "rule 2: window longer than active",
			in:   []Tier{{Limit: 5, Window: 10 * s, Active: 3 * s, Cooldown: s, Skippable: true}},
			want: []Tier{{Limit: 5, Window: 3 * s, Active: 3 * s, Cooldown: s, Skippable: true}},
		},
		{
			// docs/semantics.md: "3. `active` not a multiple of `window` → `active` is cut down to the largest multiple."
			name: "rule 3: active cut to a multiple of window",
			in:   []Tier{{Limit: 5, Window: 2 * s, Active: 7 * s}},
			want: []Tier{{Limit: 5, Window: 2 * s, Active: 6 * s}},
		},
		{
			// docs/semantics.md: "3. `active` not a multiple of `window` → …" with sub-second units.
			name: "rule 3: sub-second",
			in:   []Tier{{Limit: 5, Window: 300 * time.Millisecond, Active: time.Second}},
			want: []Tier{{Limit: 5, Window: 300 * time.Millisecond, Active: 900 * time.Millisecond}},
		},
		{
			name: "already normal: unchanged",
			in:   []Tier{{Limit: 5, Window: s, Active: s}, {Limit: 50, Window: 5 * s, Active: 5 * s, Cooldown: 15 * s}},
			want: []Tier{{Limit: 5, Window: s, Active: s}, {Limit: 50, Window: 5 * s, Active: 5 * s, Cooldown: 15 * s}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]Tier(nil), tt.in...)
			got := NormalizeTiers(in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("NormalizeTiers(%+v) = %+v, want %+v", tt.in, got, tt.want)
			}
			again := NormalizeTiers(append([]Tier(nil), got...))
			if !reflect.DeepEqual(again, got) {
				t.Errorf("not idempotent: %+v then %+v", got, again)
			}
		})
	}
}

func TestNormalizeOnLoad(t *testing.T) {
	// docs/semantics.md: "Normalization, applied when config is loaded (what
	// `GET /v1/config` shows)" — to the default tiers and to every override.
	c := mustParse(t, `
resources:
  a/t:
    kind: tiers
    tiers: "5,1,0,0,10,4,3,0,20,2,7,1"
    domains:
      d: {tiers: "1,5,2,0"}
  a/g: {kind: gcra, burst: 1, count: 1, period: 1s}
  a/a: {kind: adaptive, min_window: 1, max_window: 2}
  a/c:
    kind: copies
    domain_limit: 500
    global_limit: 100
    groups: [{name: big, limit: 400, domains: [x]}, {name: small, limit: 10, domains: [y]}]
    domains: {x: {domain_limit: 300}, y: {domain_limit: 50}}
  a/u:
    kind: copies
    domain_limit: 500
    groups: [{name: g, limit: 0, domains: [x]}, {name: h, domains: [y]}]
`)
	s := time.Second
	wantT := []Tier{{Limit: 10, Window: 3 * s, Active: 3 * s}, {Limit: 20, Window: 2 * s, Active: 6 * s, Cooldown: s}}
	if got := c.Resources["a/t"].Tiers; !reflect.DeepEqual(got, wantT) {
		t.Errorf("default tiers = %+v, want %+v", got, wantT)
	}
	if got := c.Resources["a/t"].Domains["d"].Tiers; !reflect.DeepEqual(got, []Tier{{Limit: 1, Window: 2 * s, Active: 2 * s}}) {
		t.Errorf("override tiers = %+v", got)
	}
	// Defaults: drift 0 → DefaultDrift, max_keys 0 → DefaultMaxKeys.
	for name, r := range c.Resources {
		if *r.Drift != DefaultDrift || r.MaxKeys != DefaultMaxKeys {
			t.Errorf("%s: drift %v max_keys %d", name, r.Drift, r.MaxKeys)
		}
	}
	// docs/semantics.md (adaptive): "Every `grow_every` (10) successes … (margin 10)"; timeout 30s.
	if a := c.Resources["a/a"]; a.GrowEvery != 10 || a.Margin != 10 || a.Timeout != 30*s {
		t.Errorf("adaptive defaults = %+v", a)
	}
	if a := c.Resources["a/a"]; a.Rules != RulesOpenZiti {
		t.Errorf("adaptive rules = %q, want openziti", a.Rules)
	}
	// Adaptive defaults are not given to other kinds.
	if g := c.Resources["a/g"]; g.GrowEvery != 0 || g.Margin != 0 || g.Timeout != 0 {
		t.Errorf("gcra got adaptive defaults: %+v", g)
	}
	// docs/semantics.md (copies): "A limit above G is lowered to G (effective limit)."
	cp := c.Resources["a/c"]
	if lim(cp.DomainLimit) != 100 || lim(cp.Groups[0].Limit) != 100 || lim(cp.Groups[1].Limit) != 10 {
		t.Errorf("copies = %+v %+v", cp, cp.Groups)
	}
	if lim(cp.Domains["x"].DomainLimit) != 100 || lim(cp.Domains["y"].DomainLimit) != 50 {
		t.Errorf("copies overrides = %+v %+v", cp.Domains["x"], cp.Domains["y"])
	}
	// With G absent (none) nothing is lowered; a group limit of 0 stays 0
	// (it grants nothing) and an absent one stays absent.
	if u := c.Resources["a/u"]; lim(u.DomainLimit) != 500 || lim(u.Groups[0].Limit) != 0 || u.Groups[1].Limit != nil || u.GlobalLimit != nil {
		t.Errorf("copies without G = %+v", u)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("normalized config fails Validate: %v", err)
	}
}

func TestNormalizeIdempotent(t *testing.T) {
	// A config built in Go, not normalized, with every rule to apply.
	build := func() *Config {
		return &Config{
			Namespaces: map[string]*Namespace{"x": nil},
			Resources: map[string]*Resource{
				"a/t": {Kind: KindTiers, Tiers: []Tier{{Limit: 1, Window: 5 * time.Second, Active: 3 * time.Second}, {Limit: 2, Window: time.Second}},
					Domains: map[string]*Override{"d": {Tiers: []Tier{{Limit: 3, Window: 2 * time.Second, Active: 5 * time.Second}}}}},
				"a/c": {Kind: KindCopies, DomainLimit: Limit(9), GlobalLimit: Limit(4), Groups: []Group{{Name: "g", Limit: Limit(7), Domains: []string{"x"}}},
					Domains: map[string]*Override{"d": {DomainLimit: Limit(8)}}},
				"a/a": {Kind: KindAdaptive, MinWindow: 1, MaxWindow: 1},
				"a/p": {Kind: KindPacer, Quota: 4500, Period: time.Hour, Strategy: StrategyProportionalRemaining},
				"a/k": {Kind: KindPacer, Quota: 10, Period: time.Second},
				"a/g": {Kind: KindGCRA, Burst: 1, Count: 1, Period: time.Second, Domains: map[string]*Override{}},
			},
		}
	}
	configs := map[string]*Config{"built": build(), "default": Default(), "design": mustParse(t, designExample), "zero": {}}
	for name, c := range configs {
		t.Run(name, func(t *testing.T) {
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			c.Normalize()
			once, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			snapshot := mustParse(t, string(once))
			c.Normalize()
			if !reflect.DeepEqual(c, snapshot) {
				t.Errorf("normalize twice != once:\n%+v\n%+v", c, snapshot)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("normalized config fails Validate: %v", err)
			}
		})
	}
	// Normalize never panics, even on invalid or nil input.
	var nilc *Config
	nilc.Normalize()
	var nilr *Resource
	nilr.Normalize()
	(&Config{Resources: map[string]*Resource{"a/b": nil, "a/c": {Tiers: []Tier{{Window: -1, Active: 5}, {Window: 0, Active: 3}}, Domains: map[string]*Override{"x": nil}}}}).Normalize()
}

// lim is a limit field as a number, -1 when absent.
func lim(p *int) int { return LimitOr(p, -1) }
