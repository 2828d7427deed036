package config

import (
	"encoding/json"
	"time"
)

// The MarshalJSON methods render the config-file schema back, so that
// Parse(json.Marshal(c)) returns a config equal to c when c is valid and
// normalized: durations are Go duration strings (time.Duration.String),
// tier lists are always the list form, and a resource shows the fields of
// its kind (even when zero) plus any other field that is set. GET /v1/config
// and the config field of POST /v1/simulate are written this way.

// MarshalJSON renders c in the config-file schema. Resources is always
// present ({} when empty); namespaces is omitted when empty.
func (c Config) MarshalJSON() ([]byte, error) {
	res := c.Resources
	if res == nil {
		res = map[string]*Resource{}
	}
	return json.Marshal(struct {
		Agent      Agent                 `json:"agent"`
		Gossip     Gossip                `json:"gossip"`
		Namespaces map[string]*Namespace `json:"namespaces,omitempty"`
		Resources  map[string]*Resource  `json:"resources"`
	}{c.Agent, c.Gossip, c.Namespaces, res})
}

// MarshalJSON renders g with sync_interval as a duration string; empty
// fields are omitted.
func (g Gossip) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Bind         string   `json:"bind,omitempty"`
		Join         []string `json:"join,omitempty"`
		SyncInterval string   `json:"sync_interval,omitempty"`
		SecretFile   string   `json:"secret_file,omitempty"`
	}{g.Bind, g.Join, durationOrEmpty(g.SyncInterval), g.SecretFile})
}

// MarshalJSON renders t as {limit, window, active, cooldown, skippable},
// durations as strings ("1s").
func (t Tier) MarshalJSON() ([]byte, error) {
	return json.Marshal(tierJSON{t.Limit, t.Window.String(), t.Active.String(), t.Cooldown.String(), t.Skippable})
}

type tierJSON struct {
	Limit     int    `json:"limit"`
	Window    string `json:"window"`
	Active    string `json:"active"`
	Cooldown  string `json:"cooldown"`
	Skippable bool   `json:"skippable"`
}

// resourceJSON is the file schema of a resource; a nil pointer is omitted.
type resourceJSON struct {
	Kind    Kind     `json:"kind"`
	Shadow  bool     `json:"shadow,omitempty"`
	Drift   *float64 `json:"drift,omitempty"`
	MaxKeys int      `json:"max_keys"`

	HardLimit   *int    `json:"hard_limit,omitempty"`
	GlobalLimit *int    `json:"global_limit,omitempty"`
	Tiers       *[]Tier `json:"tiers,omitempty"`

	Burst  *int    `json:"burst,omitempty"`
	Count  *int    `json:"count,omitempty"`
	Period *string `json:"period,omitempty"`

	DomainLimit *int     `json:"domain_limit,omitempty"`
	Groups      *[]Group `json:"groups,omitempty"`

	MinWindow *int    `json:"min_window,omitempty"`
	MaxWindow *int    `json:"max_window,omitempty"`
	GrowEvery *int    `json:"grow_every,omitempty"`
	Margin    *int    `json:"margin,omitempty"`
	Timeout   *string `json:"timeout,omitempty"`
	Rules     *string `json:"rules,omitempty"`

	Strategy    *string  `json:"strategy,omitempty"`
	Quota       *int     `json:"quota,omitempty"`
	MinSleep    *string  `json:"min_sleep,omitempty"`
	Multiplier  *float64 `json:"multiplier,omitempty"`
	Jitter      *float64 `json:"jitter,omitempty"`
	ClientShare *float64 `json:"client_share,omitempty"`
	StartSleep  *string  `json:"start_sleep,omitempty"`

	Domains map[string]*overrideJSON `json:"domains,omitempty"`
}

type overrideJSON struct {
	HardLimit   *int    `json:"hard_limit,omitempty"`
	Tiers       *[]Tier `json:"tiers,omitempty"`
	Burst       *int    `json:"burst,omitempty"`
	Count       *int    `json:"count,omitempty"`
	Period      *string `json:"period,omitempty"`
	DomainLimit *int    `json:"domain_limit,omitempty"`
}

// MarshalJSON renders r in the config-file schema: kind, shadow (when
// true), drift, max_keys, every field of r's kind even when zero (for kind
// pacer, every field its strategy reads), any field of another kind that
// is set (only an invalid Resource has one), and the per-domain overrides,
// each showing its kind's fields. The limit fields (hard_limit,
// global_limit, domain_limit, a group's limit) and jitter are the
// exception: they appear exactly when set, so that absent (no limit, the
// default jitter) and 0 (grants nothing, no jitter) round-trip.
func (r Resource) MarshalJSON() ([]byte, error) {
	show := func(name string, set bool) bool {
		return set || belongs(name, r.Kind) && (r.Kind != KindPacer || pacerUses(name, r.Strategy))
	}
	j := resourceJSON{Kind: r.Kind, Shadow: r.Shadow, Drift: r.Drift, MaxKeys: r.MaxKeys}
	j.HardLimit, j.GlobalLimit = r.HardLimit, r.GlobalLimit // absent stays absent
	j.Tiers = tiersIf(show("tiers", len(r.Tiers) != 0), r.Tiers)
	j.Burst = intIf(show("burst", r.Burst != 0), r.Burst)
	j.Count = intIf(show("count", r.Count != 0), r.Count)
	j.Period = durationIf(show("period", r.Period != 0), r.Period)
	j.DomainLimit = r.DomainLimit
	if show("groups", len(r.Groups) != 0) {
		gs := r.Groups
		if gs == nil {
			gs = []Group{}
		}
		j.Groups = &gs
	}
	j.MinWindow = intIf(show("min_window", r.MinWindow != 0), r.MinWindow)
	j.MaxWindow = intIf(show("max_window", r.MaxWindow != 0), r.MaxWindow)
	j.GrowEvery = intIf(show("grow_every", r.GrowEvery != 0), r.GrowEvery)
	j.Margin = intIf(show("margin", r.Margin != 0), r.Margin)
	j.Timeout = durationIf(show("timeout", r.Timeout != 0), r.Timeout)
	j.Rules = stringIf(show("rules", r.Rules != ""), string(r.Rules))
	j.Strategy = stringIf(show("strategy", r.Strategy != ""), string(r.Strategy))
	j.Quota = intIf(show("quota", r.Quota != 0), r.Quota)
	j.MinSleep = durationIf(show("min_sleep", r.MinSleep != 0), r.MinSleep)
	if show("multiplier", r.Multiplier != 0) {
		m := r.Multiplier
		j.Multiplier = &m
	}
	j.Jitter = r.Jitter // absent stays absent: the default
	j.ClientShare = r.ClientShare
	j.StartSleep = durationIf(show("start_sleep", r.StartSleep != 0), r.StartSleep)
	if len(r.Domains) > 0 {
		j.Domains = make(map[string]*overrideJSON, len(r.Domains))
		for d, o := range r.Domains {
			if o != nil {
				j.Domains[d] = o.toJSON(r.Kind)
			} else {
				j.Domains[d] = nil
			}
		}
	}
	return json.Marshal(j)
}

// MarshalJSON renders o alone. Not knowing its resource's kind, it shows
// only the fields that are set, plus tiers when the list is non-nil; a
// Resource renders its overrides with its kind's fields instead.
func (o Override) MarshalJSON() ([]byte, error) {
	j := o.toJSON("")
	if o.Tiers != nil {
		j.Tiers = &o.Tiers
	}
	return json.Marshal(j)
}

func (o *Override) toJSON(k Kind) *overrideJSON {
	show := func(name string, set bool) bool { return set || overrideBelongs(name, k) }
	return &overrideJSON{
		HardLimit:   o.HardLimit, // absent stays absent: none
		Tiers:       tiersIf(show("tiers", len(o.Tiers) != 0), o.Tiers),
		Burst:       intIf(show("burst", o.Burst != 0), o.Burst),
		Count:       intIf(show("count", o.Count != 0), o.Count),
		Period:      durationIf(show("period", o.Period != 0), o.Period),
		DomainLimit: o.DomainLimit,
	}
}

func intIf(show bool, v int) *int {
	if !show {
		return nil
	}
	return &v
}

func stringIf(show bool, v string) *string {
	if !show {
		return nil
	}
	return &v
}

func durationIf(show bool, d time.Duration) *string {
	if !show {
		return nil
	}
	s := d.String()
	return &s
}

func tiersIf(show bool, ts []Tier) *[]Tier {
	if !show {
		return nil
	}
	if ts == nil {
		ts = []Tier{}
	}
	return &ts
}

func durationOrEmpty(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// MarshalJSON renders ns with both switches, even when false, so that GET
// /v1/config shows each namespace's mode in full.
func (ns Namespace) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		IgnoreConfigured  bool `json:"ignore_configured"`
		AllowUnconfigured bool `json:"allow_unconfigured"`
	}{ns.IgnoreConfigured, ns.AllowUnconfigured})
}
