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

	"github.com/obol-dev/obol/adaptive"
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

// designExample is a full configuration of every section (the design's example; docs/operations.md documents each key).
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
		{name: "tier limit 0",
			src:  `resources: {api/search: {kind: tiers, tiers: [{limit: 5, window: 1s, active: 1s}, {limit: 0, window: 1s, active: 1s}]}}`,
			path: `resources["api/search"].tiers[1].limit`, msg: "must be ≥ 1, got 0"},
		{name: "tier limit 0 in compact form",
			src:  `resources: {api/search: {kind: tiers, tiers: "5,1,1,0,0,5,5,15"}}`,
			path: `resources["api/search"].tiers[1].limit`, msg: "must be ≥ 1, got 0"},
		{name: "tier window 0",
			src:  `resources: {a/b: {kind: tiers, tiers: [{limit: 5, window: 0s, active: 1s}]}}`,
			path: `resources["a/b"].tiers[0].window`, msg: "must be > 0, got 0s"},
		{name: "negative active",
			src:  `resources: {a/b: {kind: tiers, tiers: [{limit: 5, window: 1s, active: -1s}]}}`,
			path: `resources["a/b"].tiers[0].active`, msg: "must be ≥ 0, got -1s"},
		{name: "negative cooldown in compact form",
			src:  `resources: {a/b: {kind: tiers, tiers: "5,1,1,-2"}}`,
			path: `resources["a/b"].tiers[0].cooldown`, msg: "must be ≥ 0, got -2s"},
		{name: "number for a duration",
			src:  `resources: {a/b: {kind: tiers, tiers: [{limit: 5, window: 1s, active: 1s, cooldown: 30}]}}`,
			path: `resources["a/b"].tiers[0].cooldown`, msg: `not a bare number (for seconds write "30s")`},
		{name: "bad duration string",
			src:  `resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1d}}`,
			path: `resources["a/b"].period`, msg: `must be a duration such as "1s"`},
		{name: "duration over 100 years",
			src:  `resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1000000h}}`,
			path: `resources["a/b"].period`, msg: "must be ≤ 876000h0m0s (100 years)"},
		{name: "duration overflowing int64",
			src:  `resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 99999999999h}}`,
			path: `resources["a/b"].period`, msg: "must be ≤ 876000h0m0s (100 years)"},
		{name: "tier window required",
			src:  `resources: {a/b: {kind: tiers, tiers: [{limit: 5, active: 1s}]}}`,
			path: `resources["a/b"].tiers[0].window`, msg: "required"},
		{name: "tiers required for kind tiers",
			src:  `resources: {a/b: {kind: tiers, hard_limit: 3}}`,
			path: `resources["a/b"].tiers`, msg: "required for kind tiers"},
		{name: "tiers of the wrong type",
			src:  `resources: {a/b: {kind: tiers, tiers: 5}}`,
			path: `resources["a/b"].tiers`, msg: "must be a list of tiers or a compact string"},
		{name: "compact form not in groups of 4",
			src:  `resources: {a/b: {kind: tiers, tiers: "5,1,1"}}`,
			path: `resources["a/b"].tiers`, msg: "groups of 4 numbers"},
		{name: "compact form with a word",
			src:  `resources: {a/b: {kind: tiers, tiers: "5,1,1,0,a,1,1,0"}}`,
			path: `resources["a/b"].tiers[1].limit`, msg: `must be a number, got "a"`},
		{name: "negative hard_limit",
			src:  `resources: {a/b: {kind: tiers, tiers: "", hard_limit: -1}}`,
			path: `resources["a/b"].hard_limit`, msg: "must be ≥ 0, got -1"},
		{name: "global_limit over 1e9",
			src:  `resources: {a/b: {kind: tiers, tiers: "", global_limit: 2000000000}}`,
			path: `resources["a/b"].global_limit`, msg: "must be ≤ 1000000000, got 2000000000"},
		{name: "integer beyond int64",
			src:  `resources: {a/b: {kind: tiers, tiers: "", global_limit: 100000000000000000000000}}`,
			path: `resources["a/b"].global_limit`, msg: "must be ≤ 1000000000"},
		{name: "fractional integer",
			src:  `resources: {a/b: {kind: gcra, burst: 2.5, count: 1, period: 1s}}`,
			path: `resources["a/b"].burst`, msg: "must be a whole number, got 2.5"},
		{name: "string for an integer",
			src:  `resources: {a/b: {kind: gcra, burst: "2", count: 1, period: 1s}}`,
			path: `resources["a/b"].burst`, msg: `must be an integer, got the string "2"`},
		{name: "field of another kind",
			src:  `resources: {a/b: {kind: tiers, tiers: "5,1,1,0", burst: 10}}`,
			path: `resources["a/b"].burst`, msg: "not a field of kind tiers (burst is for kind gcra)"},
		{name: "field of another kind, even zero",
			src:  `resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1s, hard_limit: 0}}`,
			path: `resources["a/b"].hard_limit`, msg: "not a field of kind gcra"},
		{name: "kind missing",
			src:  `resources: {a/b: {drift: 0.1}}`,
			path: `resources["a/b"].kind`, msg: "required"},
		{name: "kind unknown",
			src:  `resources: {a/b: {kind: tier}}`,
			path: `resources["a/b"].kind`, msg: `must be one of tiers, gcra, copies, adaptive or pacer, got "tier" (did you mean "tiers"?)`},
		{name: "kind pacer misspelt",
			src:  `resources: {a/b: {kind: pacers, quota: 1, period: 1s}}`,
			path: `resources["a/b"].kind`, msg: `must be one of tiers, gcra, copies, adaptive or pacer, got "pacers" (did you mean "pacer"?)`},
		{name: "resource name without a slash",
			src:  `resources: {search: {kind: tiers, tiers: ""}}`,
			path: `resources["search"]`, msg: "must be NAMESPACE/NAME"},
		{name: "resource name with an empty namespace",
			src:  `resources: {/search: {kind: tiers, tiers: ""}}`,
			path: `resources["/search"]`, msg: "namespace before '/' is empty"},
		{name: "resource name with an empty name",
			src:  `resources: {api/: {kind: tiers, tiers: ""}}`,
			path: `resources["api/"]`, msg: "name after '/' is empty"},
		{name: "resource name too long",
			src:  `resources: {a/` + long + long + `: {kind: tiers, tiers: ""}}`,
			path: `resources["a/` + long + long + `"]`, msg: "at most 256 bytes, got 258"},
		{name: "gcra burst 0",
			src:  `resources: {a/b: {kind: gcra, burst: 0, count: 1, period: 1s}}`,
			path: `resources["a/b"].burst`, msg: "must be ≥ 1, got 0"},
		{name: "gcra count missing",
			src:  `resources: {a/b: {kind: gcra, burst: 1, period: 1s}}`,
			path: `resources["a/b"].count`, msg: "required for kind gcra"},
		{name: "gcra emission interval under 1ns",
			src:  `resources: {a/b: {kind: gcra, burst: 1, count: 2, period: 1ns}}`,
			path: `resources["a/b"].period`, msg: "period/count must be at least 1ns"},
		{name: "gcra burst offset overflows",
			src:  `resources: {a/b: {kind: gcra, burst: 1000000000, count: 1, period: 876000h}}`,
			path: `resources["a/b"].burst`, msg: "burst·period/count must be ≤"},
		{name: "copies negative domain_limit",
			src:  `resources: {a/b: {kind: copies, domain_limit: -1}}`,
			path: `resources["a/b"].domain_limit`, msg: "must be ≥ 0, got -1"},
		{name: "copies group without a name",
			src:  `resources: {a/b: {kind: copies, groups: [{name: "", limit: 1, domains: [x]}]}}`,
			path: `resources["a/b"].groups[0].name`, msg: "must not be empty"},
		{name: "copies duplicate group name",
			src:  `resources: {a/b: {kind: copies, groups: [{name: g, limit: 1, domains: [x]}, {name: g, limit: 1, domains: [y]}]}}`,
			path: `resources["a/b"].groups[1].name`, msg: `duplicate group name "g"`},
		{name: "copies duplicate domain in a group",
			src:  `resources: {a/b: {kind: copies, groups: [{name: g, limit: 1, domains: [x, y, x]}]}}`,
			path: `resources["a/b"].groups[0].domains[2]`, msg: `duplicate domain "x"`},
		{name: "copies group with no domains",
			src:  `resources: {a/b: {kind: copies, groups: [{name: g, limit: 1, domains: []}]}}`,
			path: `resources["a/b"].groups[0].domains`, msg: "at least one domain"},
		{name: "copies group name missing",
			src:  `resources: {a/b: {kind: copies, groups: [{limit: 1, domains: [x]}]}}`,
			path: `resources["a/b"].groups[0].name`, msg: "required"},
		// 0 once meant the default; now a written 0 is refused, saying
		// what to write.
		{name: "max_keys 0",
			src:  `resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1s, max_keys: 0}}`,
			path: `resources["a/b"].max_keys`, msg: "0 is not a bound here: leave it out for the default (1000000), or give at least 1"},
		{name: "tiers over MaxTiers (compact form)",
			src:  `resources: {a/b: {kind: tiers, tiers: "` + strings.Repeat("1,1,1,0,", 64) + `1,1,1,0"}}`,
			path: `resources["a/b"].tiers`, msg: "at most 64 tiers, got 65"},
		{name: "override tiers over MaxTiers",
			src:  `resources: {a/b: {kind: tiers, tiers: "1,1,1,0", domains: {d: {tiers: "` + strings.Repeat("1,1,1,0,", 99) + `1,1,1,0"}}}}`,
			path: `resources["a/b"].domains["d"].tiers`, msg: "at most 64 tiers, got 100"},
		{name: "adaptive client_share 0",
			src:  `resources: {a/b: {kind: adaptive, min_window: 1, max_window: 5, client_share: 0}}`,
			path: `resources["a/b"].client_share`, msg: "must be in (0, 1]"},
		{name: "adaptive client_share above 1",
			src:  `resources: {a/b: {kind: adaptive, min_window: 1, max_window: 5, client_share: 1.5}}`,
			path: `resources["a/b"].client_share`, msg: "must be in (0, 1]"},
		{name: "adaptive timeout over an hour",
			src:  `resources: {a/b: {kind: adaptive, min_window: 1, max_window: 5, timeout: 61m}}`,
			path: `resources["a/b"].timeout`, msg: "must be ≤ 1h0m0s"},
		{name: "client_share on gcra",
			src:  `resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1s, client_share: 0.5}}`,
			path: `resources["a/b"].client_share`, msg: "adaptive"},
		{name: "adaptive min_window 0",
			src:  `resources: {a/b: {kind: adaptive, min_window: 0, max_window: 5}}`,
			path: `resources["a/b"].min_window`, msg: "must be ≥ 1, got 0"},
		{name: "adaptive max below min",
			src:  `resources: {a/b: {kind: adaptive, min_window: 5, max_window: 3}}`,
			path: `resources["a/b"].max_window`, msg: "must be ≥ min_window (5), got 3"},
		{name: "adaptive negative timeout",
			src:  `resources: {a/b: {kind: adaptive, min_window: 1, max_window: 3, timeout: -1s}}`,
			path: `resources["a/b"].timeout`, msg: "must be ≥ 0, got -1s"},
		{name: "adaptive overrides",
			src:  `resources: {a/b: {kind: adaptive, min_window: 1, max_window: 3, domains: {x: {}}}}`,
			path: `resources["a/b"].domains`, msg: "kind adaptive takes no per-domain overrides"},
		{name: "adaptive rules misspelt",
			src:  `resources: {a/b: {kind: adaptive, min_window: 1, max_window: 3, rules: predictiv}}`,
			path: `resources["a/b"].rules`, msg: `must be one of openziti or predictive, got "predictiv" (did you mean "predictive"?)`},
		{name: "adaptive rules unknown",
			src:  `resources: {a/b: {kind: adaptive, min_window: 1, max_window: 3, rules: aimd}}`,
			path: `resources["a/b"].rules`, msg: `must be one of openziti or predictive, got "aimd"`},
		{name: "adaptive rules not a string",
			src:  `resources: {a/b: {kind: adaptive, min_window: 1, max_window: 3, rules: 2}}`,
			path: `resources["a/b"].rules`, msg: `must be a string, got the number 2`},
		{name: "rules on another kind",
			src:  `resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1s, rules: predictive}}`,
			path: `resources["a/b"].rules`, msg: "not a field of kind gcra (rules is for kind adaptive)"},
		{name: "pacer quota required",
			src:  `resources: {a/b: {kind: pacer, period: 1h}}`,
			path: `resources["a/b"].quota`, msg: "required for kind pacer"},
		{name: "pacer period required",
			src:  `resources: {a/b: {kind: pacer, quota: 5000}}`,
			path: `resources["a/b"].period`, msg: "required for kind pacer"},
		{name: "pacer quota 0",
			src:  `resources: {a/b: {kind: pacer, quota: 0, period: 1h}}`,
			path: `resources["a/b"].quota`, msg: "must be ≥ 1, got 0"},
		{name: "pacer period 0",
			src:  `resources: {a/b: {kind: pacer, quota: 1, period: 0s}}`,
			path: `resources["a/b"].period`, msg: "must be > 0, got 0s"},
		{name: "pacer strategy misspelt",
			src:  `resources: {a/b: {kind: pacer, quota: 1, period: 1h, strategy: keep-reserve}}`,
			path: `resources["a/b"].strategy`, msg: `must be one of keep_reserve, exponential_backoff or proportional_remaining, got "keep-reserve" (did you mean "keep_reserve"?)`},
		{name: "pacer multiplier below 1",
			src:  `resources: {a/b: {kind: pacer, quota: 1, period: 1h, strategy: exponential_backoff, multiplier: 0.5}}`,
			path: `resources["a/b"].multiplier`, msg: "must be a number ≥ 1 (0 means 1.2), got 0.5"},
		{name: "pacer multiplier infinite",
			src:  `resources: {a/b: {kind: pacer, quota: 1, period: 1h, strategy: exponential_backoff, multiplier: .inf}}`,
			path: `resources["a/b"].multiplier`, msg: "must be a number ≥ 1 (0 means 1.2), got +Inf"},
		{name: "pacer jitter above 1",
			src:  `resources: {a/b: {kind: pacer, quota: 1, period: 1h, jitter: 2}}`,
			path: `resources["a/b"].jitter`, msg: "must be in [0, 1] (absent means 0.1, 0 none), got 2"},
		{name: "pacer negative start_sleep",
			src:  `resources: {a/b: {kind: pacer, quota: 1, period: 1h, start_sleep: -1s}}`,
			path: `resources["a/b"].start_sleep`, msg: "must be ≥ 0, got -1s"},
		{name: "pacer min_sleep as a bare number",
			src:  `resources: {a/b: {kind: pacer, quota: 1, period: 1h, strategy: proportional_remaining, min_sleep: 1}}`,
			path: `resources["a/b"].min_sleep`, msg: `not a bare number (for seconds write "1s")`},
		{name: "pacer field its strategy does not read",
			src:  `resources: {a/b: {kind: pacer, quota: 1, period: 1h, min_sleep: 1s}}`,
			path: `resources["a/b"].min_sleep`, msg: "not read by strategy keep_reserve (min_sleep is for strategy exponential_backoff and proportional_remaining): leave it out"},
		{name: "pacer start_sleep under exponential_backoff",
			src:  `resources: {a/b: {kind: pacer, quota: 1, period: 1h, strategy: exponential_backoff, start_sleep: 1s}}`,
			path: `resources["a/b"].start_sleep`, msg: "not read by strategy exponential_backoff (start_sleep is for strategy keep_reserve and proportional_remaining)"},
		{name: "pacer shadow",
			src:  `resources: {a/b: {kind: pacer, quota: 1, period: 1h, shadow: true}}`,
			path: `resources["a/b"].shadow`, msg: "kind pacer has no shadow mode"},
		{name: "pacer overrides",
			src:  `resources: {a/b: {kind: pacer, quota: 1, period: 1h, domains: {x: {}}}}`,
			path: `resources["a/b"].domains`, msg: "kind pacer takes no per-domain overrides"},
		{name: "gcra field on a pacer",
			src:  `resources: {a/b: {kind: pacer, quota: 1, period: 1h, burst: 5}}`,
			path: `resources["a/b"].burst`, msg: "not a field of kind pacer (burst is for kind gcra)"},
		{name: "pacer field on gcra",
			src:  `resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1s, quota: 5}}`,
			path: `resources["a/b"].quota`, msg: "not a field of kind gcra (quota is for kind pacer)"},
		{name: "period on tiers names both kinds",
			src:  `resources: {a/b: {kind: tiers, tiers: "", period: 1s}}`,
			path: `resources["a/b"].period`, msg: "not a field of kind tiers (period is for kind gcra and pacer)"},
		{name: "pacer unknown key with a suggestion",
			src:  `resources: {a/b: {kind: pacer, quota: 1, period: 1h, startsleep: 1s}}`,
			path: `resources["a/b"].startsleep`, msg: `unknown key (did you mean "start_sleep"?)`},
		{name: "drift above 1",
			src:  `resources: {a/b: {kind: tiers, tiers: "", drift: 1.5}}`,
			path: `resources["a/b"].drift`, msg: "must be in [0, 1]"},
		{name: "drift NaN",
			src:  `resources: {a/b: {kind: tiers, tiers: "", drift: .nan}}`,
			path: `resources["a/b"].drift`, msg: "must be in [0, 1]"},
		{name: "negative max_keys",
			src:  `resources: {a/b: {kind: tiers, tiers: "", max_keys: -1}}`,
			path: `resources["a/b"].max_keys`, msg: "must be ≥ 0, got -1"},
		{name: "override field of another kind",
			src:  `resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1s, domains: {d: {burst: 1, count: 1, period: 1s, tiers: "5,1,1,0"}}}}`,
			path: `resources["a/b"].domains["d"].tiers`, msg: "not a field of a gcra override (a gcra override sets burst, count and period)"},
		{name: "gcra override missing period",
			src:  `resources: {a/b: {kind: gcra, burst: 1, count: 1, period: 1s, domains: {d: {burst: 1, count: 1}}}}`,
			path: `resources["a/b"].domains["d"].period`, msg: "required"},
		{name: "tiers override missing tiers",
			src:  `resources: {a/b: {kind: tiers, tiers: "", domains: {d: {hard_limit: 1}}}}`,
			path: `resources["a/b"].domains["d"].tiers`, msg: "required"},
		{name: "override tier validated",
			src:  `resources: {a/b: {kind: tiers, tiers: "", domains: {d: {tiers: "0,1,1,0"}}}}`,
			path: `resources["a/b"].domains["d"].tiers[0].limit`, msg: "must be ≥ 1, got 0"},
		{name: "override with a resource-only field",
			src:  `resources: {a/b: {kind: copies, domains: {d: {domain_limit: 1, global_limit: 3}}}}`,
			path: `resources["a/b"].domains["d"].global_limit`, msg: "an override sets only its kind's limit fields: domain_limit"},
		{name: "override of the wrong type",
			src:  `resources: {a/b: {kind: copies, domains: {d: 5}}}`,
			path: `resources["a/b"].domains["d"]`, msg: "must be a mapping, got the number 5"},
		{name: "empty domain",
			src:  `resources: {a/b: {kind: copies, domains: {"": {domain_limit: 1}}}}`,
			path: `resources["a/b"].domains[""]`, msg: "domain must not be empty"},
		{name: "domain too long",
			src:  `resources: {a/b: {kind: copies, domains: {` + long + long + long + `: {domain_limit: 1}}}}`,
			path: `resources["a/b"].domains["` + long + long + long + `"]`, msg: "domain must be at most 256 bytes, got 384"},
		{name: "group domain too long",
			src:  `resources: {a/b: {kind: copies, groups: [{name: g, limit: 1, domains: [` + long + long + long + `]}]}}`,
			path: `resources["a/b"].groups[0].domains[0]`, msg: "domain must be at most 256 bytes"},
		{name: "namespace with a slash",
			src:  `namespaces: {a/b: {}}`,
			path: `namespaces["a/b"]`, msg: "must not contain '/'"},
		{name: "namespace switch not a bool",
			src:  `namespaces: {a: {allow_unconfigured: yes}}`,
			path: `namespaces["a"].allow_unconfigured`, msg: `must be true or false, got the string "yes"`},
		{name: "agent http not host:port",
			src:  `agent: {http: localhost}`,
			path: `agent.http`, msg: "must be host:port"},
		{name: "agent http empty",
			src:  `agent: {http: ""}`,
			path: `agent.http`, msg: `must not be empty: give host:port, or "off"`},
		{name: "agent socket empty",
			src:  `agent: {socket: ''}`,
			path: `agent.socket`, msg: `must not be empty: give a path, or "off"`},
		{name: "agent http empty in JSON",
			src:  `{"agent": {"http": ""}}`,
			path: `agent.http`, msg: `must not be empty`},
		{name: "gossip negative sync_interval",
			src:  `gossip: {sync_interval: -1s}`,
			path: `gossip.sync_interval`, msg: "must be ≥ 0, got -1s"},
		{name: "gossip join not strings",
			src:  `gossip: {join: [a, [b]]}`,
			path: `gossip.join[1]`, msg: "must be a string, got a list"},
		{name: "gossip join not a list",
			src:  `gossip: {join: a}`,
			path: `gossip.join`, msg: "must be a list"},
		{name: "skippable not a bool",
			src:  `resources: {a/b: {kind: tiers, tiers: [{limit: 1, window: 1s, active: 1s, skippable: 1}]}}`,
			path: `resources["a/b"].tiers[0].skippable`, msg: "must be true or false, got the number 1"},
		{name: "duplicate key",
			src:  "resources:\n  a/b: {kind: tiers, tiers: \"\"}\n  a/b: {kind: tiers, tiers: \"\"}\n",
			path: `resources["a/b"]`, msg: "duplicate key (first at line 2)"},
		{name: "duplicate key in JSON",
			src:  `{"agent": {"http": "127.0.0.1:1", "http": "127.0.0.1:2"}}`,
			path: `agent.http`, msg: "duplicate key (first at line 1)"},
		{name: "resources not a mapping",
			src:  `resources: [a/b]`,
			path: `resources`, msg: "must be a mapping, got a list"},
		{name: "document not a mapping",
			src:  `[1, 2]`,
			path: ``, msg: "the document must be a mapping"},
		{name: "YAML syntax error",
			src:  "resources:\n  a/b: [\n",
			path: ``, msg: "invalid YAML"},
		{name: "two documents",
			src:  "resources: {}\n---\nagent: {}\n",
			path: ``, msg: "more than one YAML document"},
		{name: "unknown key at the top, with a suggestion",
			src:  `resource: {}`,
			path: `resource`, msg: `unknown key (did you mean "resources"?)`},
		{name: "unknown key in the resources section that is not a typo",
			src:  `x-tiers: "5,1,1,0"`,
			path: `x-tiers`, msg: "unknown key (known keys: agent, gossip, namespaces, resources)"},
		{name: "merge key with a scalar",
			src:  "resources:\n  a/b:\n    <<: 5\n    kind: copies\n",
			path: `resources["a/b"]`, msg: "a merge key (<<) takes a mapping"},
		{name: "key not a string",
			src:  "resources:\n  ? [a]\n  : {}\n",
			path: `resources`, msg: "keys must be strings"},
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
		{name: "bad tier", src: `{"kind": "tiers", "tiers": [{"limit": 0, "window": "1s", "active": "1s"}]}`, path: "resource.tiers[0].limit", msg: "must be ≥ 1, got 0"},
		{name: "empty", src: ``, path: "resource.kind", msg: "required"},
		{name: "syntax", src: `kind: [`, path: "resource", msg: "invalid YAML"},
		{name: "not a mapping", src: `[]`, path: "resource", msg: "must be a mapping"},
		{name: "unknown key", src: `{"kind": "gcra", "burst": 1, "count": 1, "period": "1s", "brust": 2}`, path: "resource.brust", msg: `did you mean "burst"`},
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
	if u := c.Resources["demo/upstream"]; u.Quota != 5000 || u.Period != time.Hour || u.Strategy != StrategyKeepReserve || *u.Jitter != adaptive.DefaultJitter {
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
