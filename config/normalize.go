package config

// Normalize rewrites c in place into the canonical form the agent runs on
// and GET /v1/config shows (docs/semantics.md, "Normalization"): every resource
// and override is normalized as Resource.Normalize describes; Namespaces and
// Resources become non-nil maps (so that callers may add entries), a nil
// namespace becomes the zero Namespace, and a namespace's caps on limits
// set by requests left at 0 become their defaults. Parse and Load already return
// normalized configs. Normalize is idempotent, never fails and never panics,
// but only a config that passes Validate is meaningful afterwards. Not safe
// for concurrent use with any other access to c.
func (c *Config) Normalize() {
	if c == nil {
		return
	}
	if len(c.Gossip.Join) == 0 {
		c.Gossip.Join = nil
	}
	if c.Namespaces == nil {
		c.Namespaces = map[string]*Namespace{}
	}
	for name, ns := range c.Namespaces {
		if ns == nil {
			ns = &Namespace{}
			c.Namespaces[name] = ns
		}
		if ns.MaxRequestLimits == 0 {
			ns.MaxRequestLimits = DefaultMaxRequestLimits
		}
		if ns.MaxRequestKeys == 0 {
			ns.MaxRequestKeys = DefaultMaxRequestKeys
		}
		if ns.MaxRequestWindow == 0 {
			ns.MaxRequestWindow = DefaultMaxRequestWindow
		}
	}
	if c.Resources == nil {
		c.Resources = map[string]*Resource{}
	}
	for _, r := range c.Resources {
		r.Normalize()
	}
}

// Normalize rewrites r in place into its canonical form:
//
//   - tiers (the default list and every override's): tiers with active = 0
//     are removed; a window longer than active is shortened to active; an
//     active that is not a multiple of window is cut down to the largest
//     multiple (NormalizeTiers);
//   - drift absent becomes DefaultDrift (0 stays 0: every hit ships at
//     once); max_keys 0 becomes DefaultMaxKeys;
//   - kind adaptive: grow_every 0 becomes adaptive.DefaultGrowEvery,
//     margin 0 adaptive.DefaultMargin, timeout 0 adaptive.DefaultTimeout
//     (filled in by adaptive.Config.WithDefaults), rules "" RulesOpenZiti,
//     client_share absent DefaultClientShare;
//   - kind pacer: strategy "" becomes StrategyKeepReserve, jitter absent
//     adaptive.DefaultJitter; for the strategies that read them, min_sleep
//     0 becomes period/quota and multiplier 0 adaptive.DefaultMultiplier
//     (filled in by adaptive.PacerConfig.WithDefaults);
//   - kind copies: with a global_limit G set, a domain_limit (default or
//     override) or group limit above G, or absent, is lowered to G, the
//     effective limit; limits stay absent when G is;
//   - empty lists and maps become nil.
//
// It is idempotent and never panics; r may be nil. Not safe for concurrent
// use with any other access to r.
func (r *Resource) Normalize() {
	if r == nil {
		return
	}
	if r.Drift == nil {
		r.Drift = Fraction(DefaultDrift)
	}
	if r.MaxKeys == 0 {
		r.MaxKeys = DefaultMaxKeys
	}
	r.Tiers = NormalizeTiers(r.Tiers)
	if len(r.Groups) == 0 {
		r.Groups = nil
	}
	switch r.Kind {
	case KindAdaptive:
		r.normalizeAdaptive()
		if r.Rules == "" {
			r.Rules = RulesOpenZiti
		}
	case KindPacer:
		if r.Strategy == "" {
			r.Strategy = StrategyKeepReserve
		}
		r.normalizePacer()
	case KindCopies:
		r.DomainLimit = capLimit(r.DomainLimit, r.GlobalLimit)
		for i := range r.Groups {
			r.Groups[i].Limit = capLimit(r.Groups[i].Limit, r.GlobalLimit)
		}
	}
	if len(r.Domains) == 0 {
		r.Domains = nil
	}
	for _, o := range r.Domains {
		if o == nil {
			continue
		}
		o.Tiers = NormalizeTiers(o.Tiers)
		if r.Kind == KindCopies {
			o.DomainLimit = capLimit(o.DomainLimit, r.GlobalLimit)
		}
	}
}

// capLimit returns limit lowered to global when global is set: an absent
// limit becomes global, a larger one is cut to it. The result is a fresh
// pointer, so normalizing never aliases two fields.
func capLimit(limit, global *int) *int {
	switch {
	case global == nil && limit == nil:
		return nil
	case global == nil:
		return Limit(*limit)
	case limit == nil || *limit > *global:
		return Limit(*global)
	}
	return Limit(*limit)
}

// NormalizeTiers returns ts normalized by the three rules of docs/semantics.md:
// (1) tiers with active = 0 are removed; (2) window > active → window =
// active; (3) active not a multiple of window → active is cut down to the
// largest multiple. It reuses ts's backing array and returns nil for an
// empty result. It is idempotent. Tiers with a window ≤ 0 (invalid) are left
// as they are.
func NormalizeTiers(ts []Tier) []Tier {
	out := ts[:0]
	for _, t := range ts {
		if t.Active == 0 {
			continue // rule 1
		}
		if t.Window > t.Active && t.Active > 0 {
			t.Window = t.Active // rule 2
		}
		if t.Window > 0 && t.Active > 0 {
			t.Active -= t.Active % t.Window // rule 3
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
