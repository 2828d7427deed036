package config

import "github.com/obol-dev/obol/adaptive"

// adaptive.go is the kinds adaptive and pacer as package adaptive takes
// them. A resource's fields translate one to one into an adaptive.Config
// (AdaptiveConfig) or an adaptive.PacerConfig (PacerConfig), in this one
// place. Each parameter has one owner: its default is package adaptive's
// Default… constant, filled in by adaptive's WithDefaults, which
// normalization calls through these translations; its bounds are checked
// here (validate.go, schema.go), with adaptive's constant where the bound
// is the algorithm's (adaptive.MinMinWindow, adaptive.MinMultiplier), and
// at least as strictly as adaptive's Validate, so the engine hands adaptive
// values it accepts as they are.

// AdaptiveConfig returns the window config of r, a resource of kind
// adaptive: min_window, max_window, grow_every, margin and timeout are
// their namesakes, and rules "predictive" is adaptive.Predictive, any
// other (a validated resource has "" or "openziti") adaptive.OpenZiti.
// Nothing is clamped or defaulted: zero fields stay zero, which adaptive
// reads as its defaults, and normalization has filled them in already in
// a resource Parse returns. It reads r and changes nothing.
func (r *Resource) AdaptiveConfig() adaptive.Config {
	rules := adaptive.OpenZiti
	if r.Rules == RulesPredictive {
		rules = adaptive.Predictive
	}
	return adaptive.Config{
		MinWindow: r.MinWindow,
		MaxWindow: r.MaxWindow,
		GrowEvery: r.GrowEvery,
		Margin:    r.Margin,
		Timeout:   r.Timeout,
		Rules:     rules,
	}
}

// DefaultClientShare is the client_share of a resource of kind adaptive
// that sets none: the whole window, no bound per client of its own.
const DefaultClientShare = 1.0

// ClientShareOr returns r's client_share, or DefaultClientShare when it is
// absent (as normalization fills it in): the fraction of the window one
// client may hold, which the engine bounds on its own (package adaptive
// has no such parameter).
func (r *Resource) ClientShareOr() float64 {
	if r.ClientShare == nil {
		return DefaultClientShare
	}
	return *r.ClientShare
}

// PacerConfig returns the pacer config of r, a resource of kind pacer:
// quota is Limit, the strategy's name its adaptive.Strategy ("" and
// "keep_reserve" KeepReserve), period, min_sleep, multiplier and
// start_sleep their namesakes. jitter is Jitter, but for what 0 means: a
// jitter of 0 in the file is none, which adaptive spells -1 (its 0 is the
// default), and an absent one is adaptive's 0, the default. Nothing is
// clamped: a resource Parse returns is validated and normalized. It reads
// r and changes nothing.
func (r *Resource) PacerConfig() adaptive.PacerConfig {
	cfg := adaptive.PacerConfig{
		Strategy:   adaptive.KeepReserve,
		Limit:      r.Quota,
		Period:     r.Period,
		MinSleep:   r.MinSleep,
		Multiplier: r.Multiplier,
		StartSleep: r.StartSleep,
	}
	switch r.Strategy {
	case StrategyExponentialBackoff:
		cfg.Strategy = adaptive.ExponentialBackoff
	case StrategyProportionalRemaining:
		cfg.Strategy = adaptive.ProportionalRemaining
	}
	if r.Jitter != nil {
		cfg.Jitter = *r.Jitter
		if cfg.Jitter == 0 {
			cfg.Jitter = -1 // none
		}
	}
	return cfg
}

// normalizeAdaptive fills in the defaults of r, a resource of kind
// adaptive: grow_every, margin and timeout as adaptive.Config.WithDefaults
// fills them (a zero one becomes its adaptive.Default… constant), and an
// absent client_share becomes DefaultClientShare.
func (r *Resource) normalizeAdaptive() {
	d := r.AdaptiveConfig().WithDefaults()
	r.GrowEvery, r.Margin, r.Timeout = d.GrowEvery, d.Margin, d.Timeout
	if r.ClientShare == nil {
		r.ClientShare = Fraction(DefaultClientShare)
	}
}

// normalizePacer fills in the defaults of r, a resource of kind pacer, as
// adaptive.PacerConfig.WithDefaults fills them: an absent jitter becomes
// adaptive.DefaultJitter; for the strategies that read them, min_sleep 0
// becomes period/quota and multiplier 0 adaptive.DefaultMultiplier.
// min_sleep is filled in only when quota and period are set (both are
// required): from adaptive's default quota or period it would be a guess
// about someone else's API.
func (r *Resource) normalizePacer() {
	d := r.PacerConfig().WithDefaults()
	if r.Jitter == nil {
		r.Jitter = Fraction(d.Jitter)
	}
	if r.MinSleep == 0 && r.Quota > 0 && r.Period != 0 && pacerUses("min_sleep", r.Strategy) {
		r.MinSleep = d.MinSleep
	}
	if r.Multiplier == 0 && pacerUses("multiplier", r.Strategy) {
		r.Multiplier = d.Multiplier
	}
}
