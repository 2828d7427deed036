package config

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestMarshalRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		src  string
	}{
		{name: "design example", src: designExample},
		{name: "default", src: string(DefaultYAML())},
		{name: "empty", src: ""},
		{name: "every field", src: `
agent: {socket: /tmp/o.sock, http: "[::1]:7070"}
gossip: {bind: ":7946", join: [a, b], sync_interval: 1m30s, secret_file: /k}
namespaces: {x: {ignore_configured: true, allow_unconfigured: true}, y: {}}
resources:
  x/t:
    kind: tiers
    shadow: true
    drift: 0.001
    max_keys: 7
    hard_limit: 3
    global_limit: 9
    tiers: [{limit: 1, window: 1500ms, active: 3s, cooldown: 24h, skippable: true}]
    domains: {"weird \"domain\"\n": {tiers: []}, d: {tiers: "2,1,1,0", hard_limit: 4}}
  x/g: {kind: gcra, burst: 1, count: 3, period: 3ns, domains: {d: {burst: 2, count: 1, period: 1h}}}
  x/c: {kind: copies, global_limit: 5, domain_limit: 9, groups: [{name: g, limit: 0, domains: [a, b]}], domains: {d: {domain_limit: 0}}}
  x/a: {kind: adaptive, min_window: 1, max_window: 1000000000, grow_every: 1, margin: 1, timeout: 1ns, rules: predictive}
  x/k: {kind: pacer, quota: 4500, period: 1h, start_sleep: 1s}
  x/e: {kind: pacer, quota: 3, period: 1s, strategy: exponential_backoff, jitter: 0}
  x/p: {kind: pacer, quota: 100, period: 1m, strategy: proportional_remaining, min_sleep: 2s, multiplier: 1.5, jitter: 0.25, start_sleep: 1s}
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.src)
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			c2, err := Parse(b)
			if err != nil {
				t.Fatalf("Parse(Marshal(c)): %v\n%s", err, b)
			}
			if !reflect.DeepEqual(c, c2) {
				t.Errorf("round trip changed the config:\n%+v\n%+v\n%s", c, c2, b)
			}
			// A value marshals like a pointer.
			b2, _ := json.Marshal(*c)
			if string(b) != string(b2) {
				t.Errorf("value and pointer render differently")
			}
		})
	}
}

func TestMarshalShape(t *testing.T) {
	c := mustParse(t, `
gossip: {sync_interval: 250ms}
resources:
  a/t: {kind: tiers, tiers: "5,1,1,0", domains: {d: {tiers: []}}}
  a/g: {kind: gcra, burst: 20, count: 20, period: 1s}
  a/a: {kind: adaptive, min_window: 1, max_window: 2}
  a/k: {kind: pacer, quota: 4500, period: 1h}
  a/e: {kind: pacer, quota: 4500, period: 1h, strategy: exponential_backoff, jitter: 0}
`)
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		`"gossip":{"sync_interval":"250ms"}`,
		`"a/t":{"kind":"tiers","drift":0.05,"max_keys":1000000,"tiers":[{"limit":5,"window":"1s","active":"1s","cooldown":"0s","skippable":false}],"domains":{"d":{"tiers":[]}}}`,
		`"a/g":{"kind":"gcra","drift":0.05,"max_keys":1000000,"burst":20,"count":20,"period":"1s"}`,
		`"a/a":{"kind":"adaptive","drift":0.05,"max_keys":1000000,"min_window":1,"max_window":2,"grow_every":10,"margin":10,"timeout":"30s","rules":"openziti","client_share":1}`,
		// A pacer shows what its strategy reads: keep_reserve no min_sleep
		// or multiplier, exponential_backoff no start_sleep.
		`"a/k":{"kind":"pacer","drift":0.05,"max_keys":1000000,"period":"1h0m0s","strategy":"keep_reserve","quota":4500,"jitter":0.1,"start_sleep":"0s"}`,
		`"a/e":{"kind":"pacer","drift":0.05,"max_keys":1000000,"period":"1h0m0s","strategy":"exponential_backoff","quota":4500,"min_sleep":"800ms","multiplier":1.2,"jitter":0}`,
		`"namespaces":{}`,
	} {
		if want == `"namespaces":{}` {
			if strings.Contains(got, `"namespaces"`) {
				t.Errorf("empty namespaces rendered: %s", got)
			}
			continue
		}
		if !strings.Contains(got, want) {
			t.Errorf("missing %s\nin %s", want, got)
		}
	}

	// Standalone renderings.
	for _, tt := range []struct {
		v    any
		want string
	}{
		{Tier{Limit: 1, Window: 500 * time.Millisecond, Active: time.Minute}, `{"limit":1,"window":"500ms","active":"1m0s","cooldown":"0s","skippable":false}`},
		{Override{Burst: 1, Count: 2, Period: time.Second}, `{"burst":1,"count":2,"period":"1s"}`},
		{Override{Tiers: []Tier{}}, `{"tiers":[]}`},
		{Namespace{}, `{"ignore_configured":false,"allow_unconfigured":false,"request_limits":false,"max_request_limits":0,"max_request_keys":0,"max_request_window":""}`},
		{Gossip{}, `{}`},
		{Config{}, `{"agent":{},"gossip":{},"resources":{}}`},
		// An invalid resource shows the stray field rather than hiding it.
		{Resource{Kind: KindGCRA, HardLimit: Limit(3)}, `{"kind":"gcra","max_keys":0,"hard_limit":3,"burst":0,"count":0,"period":"0s"}`},
	} {
		b, err := json.Marshal(tt.v)
		if err != nil || string(b) != tt.want {
			t.Errorf("Marshal(%#v) = %s, %v\nwant %s", tt.v, b, err, tt.want)
		}
	}
}

func TestMarshalResourceRoundTrip(t *testing.T) {
	for name, r := range Default().Resources {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := ParseResource(b)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, b)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Errorf("%s: round trip changed it:\n%+v\n%+v", name, r, r2)
		}
	}
}

// TestMarshalLimitsRoundTrip: "Config rendering (GET /v1/config) must
// round-trip the difference between absent and 0" for every limit field, in
// resources, overrides and groups, and for drift.
func TestMarshalLimitsRoundTrip(t *testing.T) {
	src := `
resources:
  a/zero: {kind: tiers, tiers: "5,1,1,0", hard_limit: 0, global_limit: 0, drift: 0,
           domains: {x: {tiers: "1,1,1,0", hard_limit: 0}, y: {tiers: "1,1,1,0"}}}
  a/none: {kind: tiers, tiers: "5,1,1,0"}
  c/zero: {kind: copies, domain_limit: 0, global_limit: 0, groups: [{name: g, limit: 0, domains: [m]}],
           domains: {x: {domain_limit: 0}, y: {}}}
  c/none: {kind: copies, groups: [{name: g, domains: [m]}], domains: {y: {}}}
`
	c := mustParse(t, src)
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(Marshal(c)): %v\n%s", err, b)
	}
	if !reflect.DeepEqual(c, again) {
		t.Errorf("round trip changed the config:\n%s", b)
	}
	got := string(b)
	for _, want := range []string{
		`"a/zero":{"kind":"tiers","drift":0,"max_keys":1000000,"hard_limit":0,"global_limit":0,`,
		`"x":{"hard_limit":0,"tiers"`,
		`"y":{"tiers"`,
		`"a/none":{"kind":"tiers","drift":0.05,"max_keys":1000000,"tiers"`,
		`"c/zero":{"kind":"copies","drift":0.05,"max_keys":1000000,"global_limit":0,"domain_limit":0,"groups":[{"name":"g","limit":0,"domains":["m"]}],"domains":{"x":{"domain_limit":0},"y":{"domain_limit":0}}}`, // y: absent, lowered to G
		`"c/none":{"kind":"copies","drift":0.05,"max_keys":1000000,"groups":[{"name":"g","domains":["m"]}],"domains":{"y":{}}}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %s\nin %s", want, got)
		}
	}
}
