package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// problemsOf returns the problems inside err, failing the test when err is
// not a *Problems.
func problemsOf(t *testing.T, err error) Problems {
	t.Helper()
	var ps *Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %v (%T) is not a *Problems", err, err)
	}
	if len(*ps) == 0 {
		t.Fatalf("empty *Problems returned as an error")
	}
	return *ps
}

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	c, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse: %v\nsource:\n%s", err, src)
	}
	return c
}

// designExample is the configuration shown in DESIGN.md.
const designExample = `
agent:
  socket: /run/obol/obol.sock
  http: 127.0.0.1:7070
gossip:
  bind: 0.0.0.0:7946
  join: [obol-peers.default.svc.cluster.local]
  sync_interval: 250ms
  secret_file: /etc/obol/gossip.key
namespaces:
  sandbox: {allow_unconfigured: true}
resources:
  api/search:
    kind: tiers
    hard_limit: 100
    global_limit: 1000
    drift: 0.05
    tiers: "5,1,1,0,50,5,5,15"          # or a list of {limit, window, active, cooldown, skippable}
    domains:
      tenant-42: {tiers: [{limit: 20, window: 1s, active: 1s}]}
  api/export:
    kind: gcra
    burst: 20
    count: 20
    period: 1s
    domains:
      "10.0.0.2": {burst: 20, count: 40, period: 1s}
  jobs/sandbox:
    kind: copies
    domain_limit: 5
    global_limit: 100
    groups: [{name: enterprise, limit: 40, domains: [acme, globex]}]
  auth/login:
    kind: adaptive
    min_window: 5
    max_window: 250
`

func TestParseValid(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		check func(t *testing.T, c *Config)
	}{
		{
			name: "design example",
			src:  designExample,
			check: func(t *testing.T, c *Config) {
				if c.Agent.HTTP != "127.0.0.1:7070" || c.Gossip.SyncInterval != 250*time.Millisecond {
					t.Errorf("agent/gossip = %+v %+v", c.Agent, c.Gossip)
				}
				if !c.Namespaces["sandbox"].AllowUnconfigured {
					t.Errorf("sandbox not allow_unconfigured")
				}
				s := c.Resources["api/search"]
				want := []Tier{
					{Limit: 5, Window: time.Second, Active: time.Second},
					{Limit: 50, Window: 5 * time.Second, Active: 5 * time.Second, Cooldown: 15 * time.Second},
				}
				if !reflect.DeepEqual(s.Tiers, want) {
					t.Errorf("tiers = %+v, want %+v", s.Tiers, want)
				}
				if o := s.Domains["tenant-42"]; len(o.Tiers) != 1 || o.Tiers[0].Limit != 20 {
					t.Errorf("tenant-42 override = %+v", o)
				}
				if o := c.Resources["api/export"].Domains["10.0.0.2"]; o.Count != 40 || o.Period != time.Second {
					t.Errorf("10.0.0.2 override = %+v", o)
				}
				if g := c.Resources["jobs/sandbox"].Groups; len(g) != 1 || g[0].Name != "enterprise" || lim(g[0].Limit) != 40 {
					t.Errorf("groups = %+v", g)
				}
				if l := c.Resources["auth/login"]; l.MinWindow != 5 || l.MaxWindow != 250 || l.GrowEvery != 10 || l.Margin != 10 || l.Timeout != 30*time.Second {
					t.Errorf("adaptive = %+v", l)
				}
			},
		},
		{
			name: "empty document",
			src:  "",
			check: func(t *testing.T, c *Config) {
				if len(c.Resources) != 0 || c.Resources == nil {
					t.Errorf("resources = %#v, want empty non-nil", c.Resources)
				}
			},
		},
		{
			name:  "comments only",
			src:   "# nothing here\n",
			check: func(t *testing.T, c *Config) {},
		},
		{
			name: "a listener off, the other left out (the default)",
			src:  "agent: {http: off}\n",
			check: func(t *testing.T, c *Config) {
				if c.Agent.HTTP != ListenerOff || c.Agent.Socket != "" {
					t.Errorf("agent = %+v, want http off and the default socket", c.Agent)
				}
			},
		},
		{
			name: "null sections",
			src:  "agent:\ngossip:\nnamespaces:\nresources:\n",
			check: func(t *testing.T, c *Config) {
				if c.Namespaces == nil || c.Resources == nil {
					t.Errorf("maps not made: %#v", c)
				}
			},
		},
		{
			name: "JSON",
			src:  `{"resources": {"api/search": {"kind": "tiers", "tiers": [{"limit": 5, "window": "1s", "active": "1s", "cooldown": "0s", "skippable": true}]}}}`,
			check: func(t *testing.T, c *Config) {
				if tr := c.Resources["api/search"].Tiers; len(tr) != 1 || !tr[0].Skippable {
					t.Errorf("tiers = %+v", tr)
				}
			},
		},
		{
			name: "JSON indented with tabs",
			src:  "{\n\t\"resources\": {\n\t\t\"a/b\": {\n\t\t\t\"kind\": \"gcra\", \"burst\": 1, \"count\": 1, \"period\": \"1s\"\n\t\t}\n\t}\n}\n",
			check: func(t *testing.T, c *Config) {
				if c.Resources["a/b"].Burst != 1 {
					t.Errorf("resource = %+v", c.Resources["a/b"])
				}
			},
		},
		{
			name: "compact tiers with decimals and spaces",
			src:  `resources: {a/b: {kind: tiers, tiers: " 10, 0.5, 0.5, 0 , 20,1.5,3,0.25"}}`,
			check: func(t *testing.T, c *Config) {
				want := []Tier{
					{Limit: 10, Window: 500 * time.Millisecond, Active: 500 * time.Millisecond},
					{Limit: 20, Window: 1500 * time.Millisecond, Active: 3 * time.Second, Cooldown: 250 * time.Millisecond},
				}
				if got := c.Resources["a/b"].Tiers; !reflect.DeepEqual(got, want) {
					t.Errorf("tiers = %+v, want %+v", got, want)
				}
			},
		},
		{
			name: "empty tier list rejects everything",
			src:  `resources: {a/b: {kind: tiers, tiers: []}, a/c: {kind: tiers, tiers: ""}}`,
			check: func(t *testing.T, c *Config) {
				if c.Resources["a/b"].Tiers != nil || c.Resources["a/c"].Tiers != nil {
					t.Errorf("tiers not empty")
				}
			},
		},
		{
			name: "tier list defaults: cooldown 0, not skippable",
			src:  `resources: {a/b: {kind: tiers, tiers: [{limit: 1, window: 1s, active: 2s}]}}`,
			check: func(t *testing.T, c *Config) {
				if tr := c.Resources["a/b"].Tiers[0]; tr.Cooldown != 0 || tr.Skippable {
					t.Errorf("tier = %+v", tr)
				}
			},
		},
		{
			name: "whole-number float accepted for an integer",
			src:  `resources: {a/b: {kind: gcra, burst: 5.0, count: 1e3, period: 1s}}`,
			check: func(t *testing.T, c *Config) {
				if r := c.Resources["a/b"]; r.Burst != 5 || r.Count != 1000 {
					t.Errorf("resource = %+v", r)
				}
			},
		},
		{
			name: "numeric domain keys and group domains are kept as written",
			src: `resources:
  a/b: {kind: copies, domain_limit: 3, groups: [{name: 7, limit: 2, domains: [42, 010]}], domains: {42: {domain_limit: 1}}}`,
			check: func(t *testing.T, c *Config) {
				r := c.Resources["a/b"]
				if r.Domains["42"] == nil || r.Groups[0].Name != "7" || !reflect.DeepEqual(r.Groups[0].Domains, []string{"42", "010"}) {
					t.Errorf("resource = %+v %+v", r, r.Groups)
				}
			},
		},
		{
			name: "aliases and merge keys",
			src: `
resources:
  a/one: &base {kind: tiers, hard_limit: 7, tiers: &std "5,1,1,0"}
  a/two:
    <<: *base
    hard_limit: 9
  a/three: {kind: tiers, tiers: *std}
`,
			check: func(t *testing.T, c *Config) {
				two := c.Resources["a/two"]
				if two.Kind != KindTiers || lim(two.HardLimit) != 9 || len(two.Tiers) != 1 {
					t.Errorf("a/two = %+v", two)
				}
				if len(c.Resources["a/three"].Tiers) != 1 {
					t.Errorf("a/three = %+v", c.Resources["a/three"])
				}
			},
		},
		{
			name: "resource name with more slashes; namespace modes",
			src:  `{namespaces: {api: {ignore_configured: true}}, resources: {api/v2/search: {kind: gcra, burst: 1, count: 1, period: 1s}}}`,
			check: func(t *testing.T, c *Config) {
				if c.Resources["api/v2/search"] == nil || !c.Namespaces["api"].IgnoreConfigured {
					t.Errorf("config = %+v", c)
				}
			},
		},
		{
			name: "common fields on every kind",
			src:  `resources: {a/b: {kind: adaptive, shadow: true, drift: 1, max_keys: 10, min_window: 1, max_window: 1, grow_every: 3, margin: 2, timeout: 1m}}`,
			check: func(t *testing.T, c *Config) {
				r := c.Resources["a/b"]
				if !r.Shadow || *r.Drift != 1 || r.MaxKeys != 10 || r.GrowEvery != 3 || r.Margin != 2 || r.Timeout != time.Minute {
					t.Errorf("resource = %+v", r)
				}
			},
		},
		{
			name: "adaptive rules",
			src:  `resources: {a/o: {kind: adaptive, min_window: 1, max_window: 2}, a/p: {kind: adaptive, min_window: 1, max_window: 2, rules: predictive}, a/z: {kind: adaptive, min_window: 1, max_window: 2, rules: openziti}}`,
			check: func(t *testing.T, c *Config) {
				for name, want := range map[string]Rules{"a/o": RulesOpenZiti, "a/p": RulesPredictive, "a/z": RulesOpenZiti} {
					if got := c.Resources[name].Rules; got != want {
						t.Errorf("%s: rules %q, want %q", name, got, want)
					}
				}
			},
		},
		{
			name: "pacer defaults, by strategy",
			src: `resources:
  p/k: {kind: pacer, quota: 4500, period: 1h}
  p/e: {kind: pacer, quota: 4500, period: 1h, strategy: exponential_backoff}
  p/p: {kind: pacer, quota: 100, period: 1m, strategy: proportional_remaining, min_sleep: 2s, multiplier: 1.5, jitter: 0, start_sleep: 1s}
`,
			check: func(t *testing.T, c *Config) {
				k, e, p := c.Resources["p/k"], c.Resources["p/e"], c.Resources["p/p"]
				if k.Strategy != StrategyKeepReserve || *k.Jitter != 0.1 || k.MinSleep != 0 || k.Multiplier != 0 || k.StartSleep != 0 {
					t.Errorf("keep_reserve = %+v", k)
				}
				// 3600 s / 4500 = 0.8 s, rate_throttle_client's MIN_SLEEP.
				if e.Strategy != StrategyExponentialBackoff || e.MinSleep != 800*time.Millisecond || e.Multiplier != 1.2 || *e.Jitter != 0.1 {
					t.Errorf("exponential_backoff = %+v", e)
				}
				if p.MinSleep != 2*time.Second || p.Multiplier != 1.5 || *p.Jitter != 0 || p.StartSleep != time.Second || p.Quota != 100 || p.Period != time.Minute {
					t.Errorf("proportional_remaining = %+v", p)
				}
			},
		},
		{
			name: "explicit zero of its own kind's optional fields",
			src:  `resources: {a/b: {kind: copies, domain_limit: 0, global_limit: 0, groups: []}}`,
			check: func(t *testing.T, c *Config) {
				if r := c.Resources["a/b"]; lim(r.DomainLimit) != 0 || r.Groups != nil {
					t.Errorf("resource = %+v", r)
				}
			},
		},
		{
			name:  "trailing empty document",
			src:   "resources: {}\n---\n",
			check: func(t *testing.T, c *Config) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.src)
			if err := c.Validate(); err != nil {
				t.Errorf("parsed config fails Validate: %v", err)
			}
			tt.check(t, c)
		})
	}
}

func TestParseInvalid(t *testing.T) {
	long := strings.Repeat("a", 128)
	tests := []struct {
		name string
		src  string
		path string // the one problem's exact path
		msg  string // a fragment of its message
	}{
		{"tier limit 0",
			`resources: {api/search: {kind: tiers, tiers: [{limit: 5, window: 1s, active: 1s}, {limit: 0, window: 1s, active: 1s}]}}`,
			`resources["api/search"].tiers[1].limit`, "must be ≥ 1, got 0"},
		{"tier limit 0 in compact form",
			`resources: {api/search: {kind: tiers, tiers: "5,1,1,0,0,5,5,15"}}`,
			`resources["api/search"].tiers[1].limit`, "must be ≥ 1, got 0"},
		{"tier window 0",
			`resources: {a/b: {kind: tiers, tiers: [{limit: 5, window: 0s, active: 1s}]}}`,
			`resources["a/b"].tiers[0].window`, "must be > 0, got 0s"},
		{"negative active",
			`resources: {a/b: {kind: tiers, tiers: [{limit: 5, window: 1s, active: -1s}]}}`,
			`resources["a/b"].tiers[0].active`, "must be ≥ 0, got -1s"},
		{"negative cooldown in compact form",
			`resources: {a/b: {kind: tiers, tiers: "5,1,1,-2"}}`,
			`resources["a/b"].tiers[0].cooldown`, "must be ≥ 0, got -2s"},
		{"number for a duration",
			`resources: {a/b: {kind: tiers, tiers: [{limit: 5, window: 1s, active: 1s, cooldown: 30}]}}`,
			`resources["a/b"].tiers[0].cooldown`, `not a bare number (for seconds write "30s")`},
		{"bad duration string",
			`resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1d}}`,
			`resources["a/b"].period`, `must be a duration such as "1s"`},
		{"duration over 100 years",
			`resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1000000h}}`,
			`resources["a/b"].period`, "must be ≤ 876000h0m0s (100 years)"},
		{"duration overflowing int64",
			`resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 99999999999h}}`,
			`resources["a/b"].period`, "must be ≤ 876000h0m0s (100 years)"},
		{"tier window required",
			`resources: {a/b: {kind: tiers, tiers: [{limit: 5, active: 1s}]}}`,
			`resources["a/b"].tiers[0].window`, "required"},
		{"tiers required for kind tiers",
			`resources: {a/b: {kind: tiers, hard_limit: 3}}`,
			`resources["a/b"].tiers`, "required for kind tiers"},
		{"tiers of the wrong type",
			`resources: {a/b: {kind: tiers, tiers: 5}}`,
			`resources["a/b"].tiers`, "must be a list of tiers or a compact string"},
		{"compact form not in groups of 4",
			`resources: {a/b: {kind: tiers, tiers: "5,1,1"}}`,
			`resources["a/b"].tiers`, "groups of 4 numbers"},
		{"compact form with a word",
			`resources: {a/b: {kind: tiers, tiers: "5,1,1,0,a,1,1,0"}}`,
			`resources["a/b"].tiers[1].limit`, `must be a number, got "a"`},
		{"negative hard_limit",
			`resources: {a/b: {kind: tiers, tiers: "", hard_limit: -1}}`,
			`resources["a/b"].hard_limit`, "must be ≥ 0, got -1"},
		{"global_limit over 1e9",
			`resources: {a/b: {kind: tiers, tiers: "", global_limit: 2000000000}}`,
			`resources["a/b"].global_limit`, "must be ≤ 1000000000, got 2000000000"},
		{"integer beyond int64",
			`resources: {a/b: {kind: tiers, tiers: "", global_limit: 100000000000000000000000}}`,
			`resources["a/b"].global_limit`, "must be ≤ 1000000000"},
		{"fractional integer",
			`resources: {a/b: {kind: gcra, burst: 2.5, count: 1, period: 1s}}`,
			`resources["a/b"].burst`, "must be a whole number, got 2.5"},
		{"string for an integer",
			`resources: {a/b: {kind: gcra, burst: "2", count: 1, period: 1s}}`,
			`resources["a/b"].burst`, `must be an integer, got the string "2"`},
		{"field of another kind",
			`resources: {a/b: {kind: tiers, tiers: "5,1,1,0", burst: 10}}`,
			`resources["a/b"].burst`, "not a field of kind tiers (burst is for kind gcra)"},
		{"field of another kind, even zero",
			`resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1s, hard_limit: 0}}`,
			`resources["a/b"].hard_limit`, "not a field of kind gcra"},
		{"kind missing",
			`resources: {a/b: {drift: 0.1}}`,
			`resources["a/b"].kind`, "required"},
		{"kind unknown",
			`resources: {a/b: {kind: tier}}`,
			`resources["a/b"].kind`, `must be one of tiers, gcra, copies, adaptive or pacer, got "tier" (did you mean "tiers"?)`},
		{"kind pacer misspelt",
			`resources: {a/b: {kind: pacers, quota: 1, period: 1s}}`,
			`resources["a/b"].kind`, `must be one of tiers, gcra, copies, adaptive or pacer, got "pacers" (did you mean "pacer"?)`},
		{"resource name without a slash",
			`resources: {search: {kind: tiers, tiers: ""}}`,
			`resources["search"]`, "must be NAMESPACE/NAME"},
		{"resource name with an empty namespace",
			`resources: {/search: {kind: tiers, tiers: ""}}`,
			`resources["/search"]`, "namespace before '/' is empty"},
		{"resource name with an empty name",
			`resources: {api/: {kind: tiers, tiers: ""}}`,
			`resources["api/"]`, "name after '/' is empty"},
		{"resource name too long",
			`resources: {a/` + long + long + `: {kind: tiers, tiers: ""}}`,
			`resources["a/` + long + long + `"]`, "at most 256 bytes, got 258"},
		{"gcra burst 0",
			`resources: {a/b: {kind: gcra, burst: 0, count: 1, period: 1s}}`,
			`resources["a/b"].burst`, "must be ≥ 1, got 0"},
		{"gcra count missing",
			`resources: {a/b: {kind: gcra, burst: 1, period: 1s}}`,
			`resources["a/b"].count`, "required for kind gcra"},
		{"gcra emission interval under 1ns",
			`resources: {a/b: {kind: gcra, burst: 1, count: 2, period: 1ns}}`,
			`resources["a/b"].period`, "period/count must be at least 1ns"},
		{"gcra burst offset overflows",
			`resources: {a/b: {kind: gcra, burst: 1000000000, count: 1, period: 876000h}}`,
			`resources["a/b"].burst`, "burst·period/count must be ≤"},
		{"copies negative domain_limit",
			`resources: {a/b: {kind: copies, domain_limit: -1}}`,
			`resources["a/b"].domain_limit`, "must be ≥ 0, got -1"},
		{"copies group without a name",
			`resources: {a/b: {kind: copies, groups: [{name: "", limit: 1, domains: [x]}]}}`,
			`resources["a/b"].groups[0].name`, "must not be empty"},
		{"copies duplicate group name",
			`resources: {a/b: {kind: copies, groups: [{name: g, limit: 1, domains: [x]}, {name: g, limit: 1, domains: [y]}]}}`,
			`resources["a/b"].groups[1].name`, `duplicate group name "g"`},
		{"copies duplicate domain in a group",
			`resources: {a/b: {kind: copies, groups: [{name: g, limit: 1, domains: [x, y, x]}]}}`,
			`resources["a/b"].groups[0].domains[2]`, `duplicate domain "x"`},
		{"copies group with no domains",
			`resources: {a/b: {kind: copies, groups: [{name: g, limit: 1, domains: []}]}}`,
			`resources["a/b"].groups[0].domains`, "at least one domain"},
		{"copies group name missing",
			`resources: {a/b: {kind: copies, groups: [{limit: 1, domains: [x]}]}}`,
			`resources["a/b"].groups[0].name`, "required"},
		{"tiers over MaxTiers (compact form)",
			`resources: {a/b: {kind: tiers, tiers: "` + strings.Repeat("1,1,1,0,", 64) + `1,1,1,0"}}`,
			`resources["a/b"].tiers`, "at most 64 tiers, got 65"},
		{"override tiers over MaxTiers",
			`resources: {a/b: {kind: tiers, tiers: "1,1,1,0", domains: {d: {tiers: "` + strings.Repeat("1,1,1,0,", 99) + `1,1,1,0"}}}}`,
			`resources["a/b"].domains["d"].tiers`, "at most 64 tiers, got 100"},
		{"adaptive client_share 0",
			`resources: {a/b: {kind: adaptive, min_window: 1, max_window: 5, client_share: 0}}`,
			`resources["a/b"].client_share`, "must be in (0, 1]"},
		{"adaptive client_share above 1",
			`resources: {a/b: {kind: adaptive, min_window: 1, max_window: 5, client_share: 1.5}}`,
			`resources["a/b"].client_share`, "must be in (0, 1]"},
		{"adaptive timeout over an hour",
			`resources: {a/b: {kind: adaptive, min_window: 1, max_window: 5, timeout: 61m}}`,
			`resources["a/b"].timeout`, "must be ≤ 1h0m0s"},
		{"client_share on gcra",
			`resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1s, client_share: 0.5}}`,
			`resources["a/b"].client_share`, "adaptive"},
		{"adaptive min_window 0",
			`resources: {a/b: {kind: adaptive, min_window: 0, max_window: 5}}`,
			`resources["a/b"].min_window`, "must be ≥ 1, got 0"},
		{"adaptive max below min",
			`resources: {a/b: {kind: adaptive, min_window: 5, max_window: 3}}`,
			`resources["a/b"].max_window`, "must be ≥ min_window (5), got 3"},
		{"adaptive negative timeout",
			`resources: {a/b: {kind: adaptive, min_window: 1, max_window: 3, timeout: -1s}}`,
			`resources["a/b"].timeout`, "must be ≥ 0, got -1s"},
		{"adaptive overrides",
			`resources: {a/b: {kind: adaptive, min_window: 1, max_window: 3, domains: {x: {}}}}`,
			`resources["a/b"].domains`, "kind adaptive takes no per-domain overrides"},
		{"adaptive rules misspelt",
			`resources: {a/b: {kind: adaptive, min_window: 1, max_window: 3, rules: predictiv}}`,
			`resources["a/b"].rules`, `must be one of openziti or predictive, got "predictiv" (did you mean "predictive"?)`},
		{"adaptive rules unknown",
			`resources: {a/b: {kind: adaptive, min_window: 1, max_window: 3, rules: aimd}}`,
			`resources["a/b"].rules`, `must be one of openziti or predictive, got "aimd"`},
		{"adaptive rules not a string",
			`resources: {a/b: {kind: adaptive, min_window: 1, max_window: 3, rules: 2}}`,
			`resources["a/b"].rules`, `must be a string, got the number 2`},
		{"rules on another kind",
			`resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1s, rules: predictive}}`,
			`resources["a/b"].rules`, "not a field of kind gcra (rules is for kind adaptive)"},
		{"pacer quota required",
			`resources: {a/b: {kind: pacer, period: 1h}}`,
			`resources["a/b"].quota`, "required for kind pacer"},
		{"pacer period required",
			`resources: {a/b: {kind: pacer, quota: 5000}}`,
			`resources["a/b"].period`, "required for kind pacer"},
		{"pacer quota 0",
			`resources: {a/b: {kind: pacer, quota: 0, period: 1h}}`,
			`resources["a/b"].quota`, "must be ≥ 1, got 0"},
		{"pacer period 0",
			`resources: {a/b: {kind: pacer, quota: 1, period: 0s}}`,
			`resources["a/b"].period`, "must be > 0, got 0s"},
		{"pacer strategy misspelt",
			`resources: {a/b: {kind: pacer, quota: 1, period: 1h, strategy: keep-reserve}}`,
			`resources["a/b"].strategy`, `must be one of keep_reserve, exponential_backoff or proportional_remaining, got "keep-reserve" (did you mean "keep_reserve"?)`},
		{"pacer multiplier below 1",
			`resources: {a/b: {kind: pacer, quota: 1, period: 1h, strategy: exponential_backoff, multiplier: 0.5}}`,
			`resources["a/b"].multiplier`, "must be a number ≥ 1 (0 means 1.2), got 0.5"},
		{"pacer multiplier infinite",
			`resources: {a/b: {kind: pacer, quota: 1, period: 1h, strategy: exponential_backoff, multiplier: .inf}}`,
			`resources["a/b"].multiplier`, "must be a number ≥ 1 (0 means 1.2), got +Inf"},
		{"pacer jitter above 1",
			`resources: {a/b: {kind: pacer, quota: 1, period: 1h, jitter: 2}}`,
			`resources["a/b"].jitter`, "must be in [0, 1] (absent means 0.1, 0 none), got 2"},
		{"pacer negative start_sleep",
			`resources: {a/b: {kind: pacer, quota: 1, period: 1h, start_sleep: -1s}}`,
			`resources["a/b"].start_sleep`, "must be ≥ 0, got -1s"},
		{"pacer min_sleep as a bare number",
			`resources: {a/b: {kind: pacer, quota: 1, period: 1h, strategy: proportional_remaining, min_sleep: 1}}`,
			`resources["a/b"].min_sleep`, `not a bare number (for seconds write "1s")`},
		{"pacer field its strategy does not read",
			`resources: {a/b: {kind: pacer, quota: 1, period: 1h, min_sleep: 1s}}`,
			`resources["a/b"].min_sleep`, "not read by strategy keep_reserve (min_sleep is for strategy exponential_backoff and proportional_remaining): leave it out"},
		{"pacer start_sleep under exponential_backoff",
			`resources: {a/b: {kind: pacer, quota: 1, period: 1h, strategy: exponential_backoff, start_sleep: 1s}}`,
			`resources["a/b"].start_sleep`, "not read by strategy exponential_backoff (start_sleep is for strategy keep_reserve and proportional_remaining)"},
		{"pacer shadow",
			`resources: {a/b: {kind: pacer, quota: 1, period: 1h, shadow: true}}`,
			`resources["a/b"].shadow`, "kind pacer has no shadow mode"},
		{"pacer overrides",
			`resources: {a/b: {kind: pacer, quota: 1, period: 1h, domains: {x: {}}}}`,
			`resources["a/b"].domains`, "kind pacer takes no per-domain overrides"},
		{"gcra field on a pacer",
			`resources: {a/b: {kind: pacer, quota: 1, period: 1h, burst: 5}}`,
			`resources["a/b"].burst`, "not a field of kind pacer (burst is for kind gcra)"},
		{"pacer field on gcra",
			`resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1s, quota: 5}}`,
			`resources["a/b"].quota`, "not a field of kind gcra (quota is for kind pacer)"},
		{"period on tiers names both kinds",
			`resources: {a/b: {kind: tiers, tiers: "", period: 1s}}`,
			`resources["a/b"].period`, "not a field of kind tiers (period is for kind gcra and pacer)"},
		{"pacer unknown key with a suggestion",
			`resources: {a/b: {kind: pacer, quota: 1, period: 1h, startsleep: 1s}}`,
			`resources["a/b"].startsleep`, `unknown key (did you mean "start_sleep"?)`},
		{"drift above 1",
			`resources: {a/b: {kind: tiers, tiers: "", drift: 1.5}}`,
			`resources["a/b"].drift`, "must be in [0, 1]"},
		{"drift NaN",
			`resources: {a/b: {kind: tiers, tiers: "", drift: .nan}}`,
			`resources["a/b"].drift`, "must be in [0, 1]"},
		{"negative max_keys",
			`resources: {a/b: {kind: tiers, tiers: "", max_keys: -1}}`,
			`resources["a/b"].max_keys`, "must be ≥ 0, got -1"},
		{"override field of another kind",
			`resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1s, domains: {d: {burst: 1, count: 1, period: 1s, tiers: "5,1,1,0"}}}}`,
			`resources["a/b"].domains["d"].tiers`, "not a field of a gcra override (a gcra override sets burst, count and period)"},
		{"gcra override missing period",
			`resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1s, domains: {d: {burst: 1, count: 1}}}}`,
			`resources["a/b"].domains["d"].period`, "required"},
		{"tiers override missing tiers",
			`resources: {a/b: {kind: tiers, tiers: "", domains: {d: {hard_limit: 1}}}}`,
			`resources["a/b"].domains["d"].tiers`, "required"},
		{"override tier validated",
			`resources: {a/b: {kind: tiers, tiers: "", domains: {d: {tiers: "0,1,1,0"}}}}`,
			`resources["a/b"].domains["d"].tiers[0].limit`, "must be ≥ 1, got 0"},
		{"override with a resource-only field",
			`resources: {a/b: {kind: copies, domains: {d: {domain_limit: 1, global_limit: 3}}}}`,
			`resources["a/b"].domains["d"].global_limit`, "an override sets only its kind's limit fields: domain_limit"},
		{"override of the wrong type",
			`resources: {a/b: {kind: copies, domains: {d: 5}}}`,
			`resources["a/b"].domains["d"]`, "must be a mapping, got the number 5"},
		{"empty domain",
			`resources: {a/b: {kind: copies, domains: {"": {domain_limit: 1}}}}`,
			`resources["a/b"].domains[""]`, "domain must not be empty"},
		{"domain too long",
			`resources: {a/b: {kind: copies, domains: {` + long + long + long + `: {domain_limit: 1}}}}`,
			`resources["a/b"].domains["` + long + long + long + `"]`, "domain must be at most 256 bytes, got 384"},
		{"group domain too long",
			`resources: {a/b: {kind: copies, groups: [{name: g, limit: 1, domains: [` + long + long + long + `]}]}}`,
			`resources["a/b"].groups[0].domains[0]`, "domain must be at most 256 bytes"},
		{"namespace with a slash",
			`namespaces: {a/b: {}}`,
			`namespaces["a/b"]`, "must not contain '/'"},
		{"namespace switch not a bool",
			`namespaces: {a: {allow_unconfigured: yes}}`,
			`namespaces["a"].allow_unconfigured`, `must be true or false, got the string "yes"`},
		{"agent http not host:port",
			`agent: {http: localhost}`,
			`agent.http`, "must be host:port"},
		{"agent http empty",
			`agent: {http: ""}`,
			`agent.http`, `must not be empty: give host:port, or "off"`},
		{"agent socket empty",
			`agent: {socket: ''}`,
			`agent.socket`, `must not be empty: give a path, or "off"`},
		{"agent http empty in JSON",
			`{"agent": {"http": ""}}`,
			`agent.http`, `must not be empty`},
		{"gossip negative sync_interval",
			`gossip: {sync_interval: -1s}`,
			`gossip.sync_interval`, "must be ≥ 0, got -1s"},
		{"gossip join not strings",
			`gossip: {join: [a, [b]]}`,
			`gossip.join[1]`, "must be a string, got a list"},
		{"gossip join not a list",
			`gossip: {join: a}`,
			`gossip.join`, "must be a list"},
		{"skippable not a bool",
			`resources: {a/b: {kind: tiers, tiers: [{limit: 1, window: 1s, active: 1s, skippable: 1}]}}`,
			`resources["a/b"].tiers[0].skippable`, "must be true or false, got the number 1"},
		{"duplicate key",
			"resources:\n  a/b: {kind: tiers, tiers: \"\"}\n  a/b: {kind: tiers, tiers: \"\"}\n",
			`resources["a/b"]`, "duplicate key (first at line 2)"},
		{"duplicate key in JSON",
			`{"agent": {"http": "127.0.0.1:1", "http": "127.0.0.1:2"}}`,
			`agent.http`, "duplicate key (first at line 1)"},
		{"resources not a mapping",
			`resources: [a/b]`,
			`resources`, "must be a mapping, got a list"},
		{"document not a mapping",
			`[1, 2]`,
			``, "the document must be a mapping"},
		{"YAML syntax error",
			"resources:\n  a/b: [\n",
			``, "invalid YAML"},
		{"two documents",
			"resources: {}\n---\nagent: {}\n",
			``, "more than one YAML document"},
		{"unknown key at the top, with a suggestion",
			`resource: {}`,
			`resource`, `unknown key (did you mean "resources"?)`},
		{"unknown key in the resources section that is not a typo",
			`x-tiers: "5,1,1,0"`,
			`x-tiers`, "unknown key (known keys: agent, gossip, namespaces, resources)"},
		{"merge key with a scalar",
			"resources:\n  a/b:\n    <<: 5\n    kind: copies\n",
			`resources["a/b"]`, "a merge key (<<) takes a mapping"},
		{"key not a string",
			"resources:\n  ? [a]\n  : {}\n",
			`resources`, "keys must be strings"},
	}
	if len(tests) < 25 {
		t.Fatalf("only %d cases", len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.src))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c)
			}
			ps := problemsOf(t, err)
			if len(ps) != 1 {
				t.Errorf("got %d problems, want 1:\n%v", len(ps), err)
			}
			p := ps[0]
			if p.Path != tt.path || !strings.Contains(p.Message, tt.msg) {
				t.Errorf("got problem %q\nwant path %q with message containing %q", p.String(), tt.path, tt.msg)
			}
			if tt.path != "" && !strings.HasPrefix(err.Error(), tt.path+": ") {
				t.Errorf("Error() = %q, want it to start with the path", err.Error())
			}
		})
	}
}

func TestParseEveryProblem(t *testing.T) {
	src := `
agent:
  http: nope
  sokcet: /tmp/x
gossip:
  sync_interval: 5
namespaces:
  a/b: {}
resources:
  api/search:
    kind: tiers
    tiers: "0,1,1,0,5,0,1,0"
    hard_limit: -3
    burst: 2
    domains:
      t1: {tiers: [{limit: 1, window: 1s}], hard_limit: x}
  api/export:
    kind: gcra
    burst: 0
    count: 0
    period: 0s
  nope:
    kind: copies
    groups: [{name: g, limit: -1, domains: [a, a]}, {name: g, limit: 1, domains: [b]}]
`
	_, err := Parse([]byte(src))
	ps := problemsOf(t, err)
	want := []string{
		`agent.http: must be host:port (e.g. "127.0.0.1:7070"), got "nope"`,
		`agent.sokcet: unknown key (did you mean "socket"?)`,
		`gossip.sync_interval: must be a duration string such as "1s" or "250ms", not a bare number (for seconds write "5s")`,
		`namespaces["a/b"]: namespace name must not contain '/' (it is the part of a resource name before '/')`,
		`resources["api/export"].burst: must be ≥ 1, got 0`,
		`resources["api/export"].count: must be ≥ 1, got 0`,
		`resources["api/export"].period: must be > 0, got 0s`,
		`resources["api/search"].burst: not a field of kind tiers (burst is for kind gcra)`,
		`resources["api/search"].domains["t1"].hard_limit: must be an integer, got the string "x"`,
		`resources["api/search"].domains["t1"].tiers[0].active: required`,
		`resources["api/search"].hard_limit: must be ≥ 0, got -3`,
		`resources["api/search"].tiers[0].limit: must be ≥ 1, got 0`,
		`resources["api/search"].tiers[1].window: must be > 0, got 0s`,
		`resources["nope"]: resource name must be NAMESPACE/NAME (e.g. "api/search"), got "nope"`,
		`resources["nope"].groups[0].domains[1]: duplicate domain "a" in group (also domains[0])`,
		`resources["nope"].groups[0].limit: must be ≥ 0, got -1`,
		`resources["nope"].groups[1].name: duplicate group name "g" (also resources["nope"].groups[0])`,
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.String())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err.Error() != strings.Join(want, "\n") {
		t.Errorf("Error() is not one problem per line, sorted:\n%s", err.Error())
	}
	// Lines point into the file.
	for _, p := range ps {
		if p.Line == 0 {
			t.Errorf("%s: no line", p)
		}
	}
	if ps[0].Line != 3 {
		t.Errorf("agent.http at line %d, want 3", ps[0].Line)
	}
}

func TestParseUnknownKeysAtEveryLevel(t *testing.T) {
	src := `
bogus0: 1
agent: {bogus1: 1}
gossip: {bogus2: 1}
namespaces: {ns: {bogus3: 1}}
resources:
  a/t:
    kind: tiers
    bogus4: 1
    tiers: [{limit: 1, window: 1s, active: 1s, bogus5: 1}]
    domains: {d: {tiers: "", bogus6: 1}}
  a/c:
    kind: copies
    groups: [{name: g, limit: 1, domains: [x], bogus7: 1}]
`
	_, err := Parse([]byte(src))
	ps := problemsOf(t, err)
	want := []string{
		`agent.bogus1`,
		`bogus0`,
		`gossip.bogus2`,
		`namespaces["ns"].bogus3`,
		`resources["a/c"].groups[0].bogus7`,
		`resources["a/t"].bogus4`,
		`resources["a/t"].domains["d"].bogus6`,
		`resources["a/t"].tiers[0].bogus5`,
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.Path)
		if !strings.HasPrefix(p.Message, "unknown key") {
			t.Errorf("%s: not an unknown-key message", p)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("paths:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestParseAliasBomb(t *testing.T) {
	// 1000 resources × 1000 overrides × 1000 tiers from a few kilobytes: the
	// walker must give up instead of building a billion tiers.
	var b strings.Builder
	b.WriteString("t: &t {limit: 1, window: 1s, active: 1s}\n")
	b.WriteString("o: &o {tiers: [*t")
	b.WriteString(strings.Repeat(", *t", 999))
	b.WriteString("]}\nr: &r {kind: tiers, tiers: \"\", domains: {")
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&b, "d%d: *o, ", i)
	}
	b.WriteString("}}\nresources: {")
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&b, "a/%d: *r, ", i)
	}
	b.WriteString("}\n")
	start := time.Now()
	_, err := Parse([]byte(b.String()))
	ps := problemsOf(t, err)
	found := false
	for _, p := range ps {
		if p.Path == "" && strings.Contains(p.Message, "document too large") {
			found = true
		}
	}
	if !found {
		t.Errorf("no 'document too large' problem in %d problems; first: %v", len(ps), ps[0])
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Parse took %v", d)
	}
}

func TestParseResource(t *testing.T) {
	r, err := ParseResource([]byte(`{"kind": "tiers", "tiers": "5,2,1,0", "domains": {"x": {"tiers": [{"limit": 1, "window": "1s", "active": "0s"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	// Normalized: window 2s > active 1s → 1s; the override's only tier has active 0 → removed.
	if want := []Tier{{Limit: 5, Window: time.Second, Active: time.Second}}; !reflect.DeepEqual(r.Tiers, want) {
		t.Errorf("tiers = %+v", r.Tiers)
	}
	if r.Domains["x"].Tiers != nil || *r.Drift != DefaultDrift {
		t.Errorf("resource = %+v", r)
	}

	tests := []struct {
		name, src, path, msg string
	}{
		{"bad tier", `{"kind": "tiers", "tiers": [{"limit": 0, "window": "1s", "active": "1s"}]}`, "resource.tiers[0].limit", "must be ≥ 1, got 0"},
		{"empty", ``, "resource.kind", "required"},
		{"syntax", `kind: [`, "resource", "invalid YAML"},
		{"not a mapping", `[]`, "resource", "must be a mapping"},
		{"unknown key", `{"kind": "gcra", "burst": 1, "count": 1, "period": "1s", "brust": 2}`, "resource.brust", `did you mean "burst"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseResource([]byte(tt.src))
			ps := problemsOf(t, err)
			if len(ps) != 1 || ps[0].Path != tt.path || !strings.Contains(ps[0].Message, tt.msg) {
				t.Errorf("got %v, want %s: …%s…", err, tt.path, tt.msg)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(designExample), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(good); err != nil || len(c.Resources) != 4 {
		t.Fatalf("Load = %v, %v", c, err)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("resources: {a/b: {kind: tiers}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(bad)
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), `resources["a/b"].tiers: required`) {
		t.Errorf("Load(bad) = %v", err)
	}
	problemsOf(t, err)

	missing := filepath.Join(dir, "missing.yaml")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v", err)
	}
}

func TestDefault(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default fails Validate: %v", err)
	}
	if _, err := Parse(DefaultYAML()); err != nil {
		t.Fatalf("default.yaml: %v", err)
	}
	if ns := c.Namespaces["demo"]; ns == nil || ns.AllowUnconfigured || ns.IgnoreConfigured {
		t.Errorf("demo namespace = %+v", ns)
	}
	kinds := map[string]Kind{"demo/search": KindTiers, "demo/export": KindGCRA, "demo/jobs": KindCopies, "demo/login": KindAdaptive, "demo/upstream": KindPacer}
	for name, k := range kinds {
		if r := c.Resources[name]; r == nil || r.Kind != k {
			t.Errorf("%s = %+v, want kind %s", name, r, k)
		}
	}
	s := c.Resources["demo/search"]
	if lim(s.HardLimit) != 100 || s.GlobalLimit != nil || len(s.Tiers) != 2 || s.Tiers[1].Limit != 50 || lim(s.Domains["blocked"].HardLimit) != 0 {
		t.Errorf("demo/search = %+v", s)
	}
	if e := c.Resources["demo/export"]; e.Burst != 20 || e.Count != 20 || e.Period != time.Second {
		t.Errorf("demo/export = %+v", e)
	}
	if j := c.Resources["demo/jobs"]; lim(j.DomainLimit) != 5 || lim(j.GlobalLimit) != 100 || len(j.Groups) != 2 || lim(j.Groups[1].Limit) != 0 {
		t.Errorf("demo/jobs = %+v", j)
	}
	if l := c.Resources["demo/login"]; l.MinWindow != 5 || l.MaxWindow != 250 || l.Rules != RulesOpenZiti {
		t.Errorf("demo/login = %+v", l)
	}
	if u := c.Resources["demo/upstream"]; u.Quota != 5000 || u.Period != time.Hour || u.Strategy != StrategyKeepReserve || *u.Jitter != DefaultPacerJitter {
		t.Errorf("demo/upstream = %+v", u)
	}
	// Each call is a fresh copy.
	*c.Resources["demo/search"].HardLimit = 1
	if lim(Default().Resources["demo/search"].HardLimit) != 100 {
		t.Error("Default shares state between calls")
	}
}

func TestProblemsSortNaturally(t *testing.T) {
	err := asError([]Problem{
		{Path: "r.tiers[10].limit", Message: "b"},
		{Path: "r.tiers[2].limit", Message: "a"},
		{Path: "", Message: "doc"},
		{Path: "r.tiers[2].limit", Message: "a"}, // duplicate: dropped
		{Path: "r.tiers[2].active", Message: "c"},
	})
	want := "doc\nr.tiers[2].active: c\nr.tiers[2].limit: a\nr.tiers[10].limit: b"
	if err.Error() != want {
		t.Errorf("Error() =\n%s\nwant\n%s", err.Error(), want)
	}
	if asError(nil) != nil {
		t.Error("asError(nil) != nil")
	}
}
