package config

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// Seeds beyond testdata/fuzz/<FuzzName>/, which holds real configs.
var fuzzSeeds = []string{
	"",
	"{}",
	designExample,
	`resources: {a/b: {kind: tiers, tiers: "5,1,1,0,50,5,5,15"}}`,
	`resources: {a/b: &r {kind: gcra, burst: 1, count: 1, period: 1s}, a/c: {<<: *r, burst: 2}}`,
	`{"resources": {"a/b": {"kind": "copies", "domain_limit": 5, "groups": [{"name": "g", "limit": 2, "domains": ["x"]}]}}}`,
}

// checkProblems asserts that a failure is a well-formed *Problems.
func checkProblems(t *testing.T, err error) {
	t.Helper()
	var ps *Problems
	if !errors.As(err, &ps) || len(*ps) == 0 {
		t.Fatalf("error is not a non-empty *Problems: %v", err)
	}
	for _, p := range *ps {
		if p.Message == "" {
			t.Fatalf("problem with no message at %q", p.Path)
		}
	}
	_ = err.Error()
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add(DefaultYAML())
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			checkProblems(t, err)
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse returned a config that fails Validate: %v", err)
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		c2, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse(Marshal(c)): %v\n%s", err, b)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip changed the config:\n%s", b)
		}
		c2.Normalize() // already normal: nothing changes
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("Normalize is not idempotent:\n%s", b)
		}
	})
}

func FuzzParseResource(f *testing.F) {
	for _, s := range []string{
		`{"kind": "tiers", "tiers": "5,1,1,0", "hard_limit": 10}`,
		`{"kind": "gcra", "burst": 20, "count": 20, "period": "1s", "domains": {"x": {"burst": 1, "count": 1, "period": "1ms"}}}`,
		`kind: adaptive
min_window: 5
max_window: 250`,
		`{"kind": "copies", "global_limit": 3, "domain_limit": 9}`,
		`kind: tiers`,
		`{"kind": "adaptive", "min_window": 1, "max_window": 9, "rules": "predictive"}`,
		`{"kind": "pacer", "quota": 4500, "period": "1h", "strategy": "proportional_remaining", "multiplier": 1.5, "jitter": 0.2, "min_sleep": "1s", "start_sleep": "2s"}`,
		`kind: pacer
quota: 100
period: 1m
strategy: exponential_backoff
jitter: 0`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseResource(data)
		if err != nil {
			checkProblems(t, err)
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("ParseResource returned a resource that fails Validate: %v", err)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		r2, err := ParseResource(b)
		if err != nil {
			t.Fatalf("ParseResource(Marshal(r)): %v\n%s", err, b)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip changed the resource:\n%s", b)
		}
	})
}

func FuzzParseTiers(f *testing.F) {
	for _, s := range []string{"5,1,1,0,50,5,5,15", "5,1,1,0,1,15,15,0", "50,15,15,30", "1,0.5,0.25,0", "5,1,1", "a,1,1,0", "0,1,1,0", "-1,1,1,0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ts, err := ParseTiers(s)
		if err != nil {
			checkProblems(t, err)
			return
		}
		// What ParseTiers accepts is valid in a resource, normalizes
		// idempotently and survives the list form.
		r := &Resource{Kind: KindTiers, Tiers: ts}
		if err := r.Validate(); err != nil {
			t.Fatalf("ParseTiers(%q) = %+v, which fails Validate: %v", s, ts, err)
		}
		r.Normalize()
		once := append([]Tier(nil), r.Tiers...)
		if again := NormalizeTiers(append([]Tier(nil), once...)); !reflect.DeepEqual(again, r.Tiers) {
			t.Fatalf("NormalizeTiers not idempotent: %+v then %+v", once, again)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := ParseResource(b)
		if err != nil {
			t.Fatalf("ParseResource(Marshal(r)): %v\n%s", err, b)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip changed the tiers:\n%s", b)
		}
	})
}
