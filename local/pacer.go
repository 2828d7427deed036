package local

import (
	"fmt"
	"math"
	"time"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/config"
)

// pacer.go is the kind pacer: one adaptive.Pacer per resource, which tells
// the callers of a rate-limited API elsewhere how long to wait before each
// call (Pace) and learns from each reply (Observe).
//
// The pacer is per agent and nothing of it is gossiped. Its input is the
// remaining count the paced API reports, which every client of the quota
// sees alike: that shared signal is how KeepReserve's clients converge on
// equal shares without knowing of each other, so agents need not tell each
// other anything. Gossiping it would add a tick of delay to a signal each
// agent already reads first-hand, and a wait is advice to one caller, not
// a count that could be over-spent.
//
// All of an agent's callers share its one pacer, as the threads of a
// process share rate_throttle_client's throttle: under KeepReserve they
// take successive slots of one schedule; the two baselines keep the state
// of one call at a time, so with concurrent callers a 429 makes the next
// Pace, whoever asks, wait out the backoff.

// pacerRes is the state of a resource of kind pacer: its pacer, and the
// config it was made with (a reload that changes it starts a fresh one).
type pacerRes struct {
	p   *adaptive.Pacer
	cfg adaptive.PacerConfig
}

// pacerConfig returns the pacer config of rc (validated and normalized).
func pacerConfig(rc *config.Resource) adaptive.PacerConfig {
	cfg := adaptive.PacerConfig{
		Strategy:   adaptive.KeepReserve,
		Limit:      max(rc.Quota, 0),
		Period:     max(rc.Period, 0),
		MinSleep:   max(rc.MinSleep, 0),
		Multiplier: rc.Multiplier,
		StartSleep: max(rc.StartSleep, 0),
	}
	switch rc.Strategy {
	case config.StrategyExponentialBackoff:
		cfg.Strategy = adaptive.ExponentialBackoff
	case config.StrategyProportionalRemaining:
		cfg.Strategy = adaptive.ProportionalRemaining
	}
	if cfg.Multiplier < 1 || math.IsInf(cfg.Multiplier, 0) || math.IsNaN(cfg.Multiplier) {
		cfg.Multiplier = 0 // the default; a validated config has none of these
	}
	if rc.Jitter != nil {
		switch j := *rc.Jitter; {
		case j > 0 && j <= 1:
			cfg.Jitter = j
		default:
			cfg.Jitter = -1 // 0 in the config file: none
		}
	}
	return cfg
}

// pacerFromConfig returns the state of a pacer resource, nil when its
// namespace ignores its config (it then never asks anyone to wait).
func pacerFromConfig(rc *config.Resource, ignore bool) *pacerRes {
	if ignore {
		return nil
	}
	cfg := pacerConfig(rc)
	p, err := adaptive.NewPacer(cfg)
	if err != nil {
		panic(fmt.Sprintf("local: pacer config %+v: %v", rc, err)) // pacerConfig makes it valid
	}
	return &pacerRes{p: p, cfg: cfg}
}

// adoptPacer makes nr (freshly built by a reload) keep old's pacer when
// the pacer's config is unchanged. A changed config (strategy, quota,
// period, a sleep, the multiplier or the jitter) keeps the fresh pacer:
// what the old one learned was fitted to the old settings.
func adoptPacer(nr, old *resource) {
	if nr.pacer != nil && old.pacer != nil && nr.pacer.cfg == old.pacer.cfg {
		nr.pacer = old.pacer
	}
}

// Pacing is the outcome of Pace and Observe.
type Pacing struct {
	// Wait is, from Pace, how long the caller should wait before its
	// call; from Observe, how long a call asking now would wait (without
	// jitter, and without counting it). 0 for a lenient pacing.
	Wait time.Duration
	// Rate is the rate, in calls per second, the pacer spaces calls at
	// now; +Inf when it does not space them (nothing learned yet, a quota
	// well above its reserve, or a strategy that only backs off).
	Rate float64
	// Remaining is the last remaining count the pacer saw (a 429 counts
	// as 0); -1 when it has seen none, and for a lenient pacing.
	Remaining int
	// Lenient is true when the resource is paced without a pacer: it is
	// unconfigured (its namespace allows that) or its namespace ignores
	// its config. Wait is then 0.
	Lenient bool
}

func lenientPacing() Pacing { return Pacing{Rate: math.Inf(1), Remaining: -1, Lenient: true} }

// pacerOf returns the pacer of resource, nil for a lenient one.
func (e *Engine) pacerOf(resource, call string) (*pacerRes, error) {
	r, ok := e.res[resource]
	if !ok {
		ns := e.cfg.Namespaces[namespaceOf(resource)]
		if ns == nil || !(ns.AllowUnconfigured || ns.IgnoreConfigured) {
			return nil, fmt.Errorf("%w: %q has no config and its namespace %q does not allow unconfigured resources", ErrUnknownResource, resource, namespaceOf(resource))
		}
		return nil, nil
	}
	if r.kind != config.KindPacer {
		return nil, wrongKind(r, call)
	}
	return r.pacer, nil
}

// Pace returns how long the caller should wait, from t, before its next
// call to the API the pacer resource stands for, and counts that call as
// made at t plus the wait. Errors: ErrUnknownResource, ErrWrongKind (the
// resource is not a pacer).
func (e *Engine) Pace(t time.Time, resource string) (Pacing, error) {
	pr, err := e.pacerOf(resource, "pace")
	if err != nil || pr == nil {
		return lenientPacing(), err
	}
	d := pr.p.Delay(t)
	st := pr.p.Status(t)
	return Pacing{Wait: d, Rate: st.Rate, Remaining: st.Remaining}, nil
}

// MaxRemaining is the largest remaining count Observe takes: 18 digits,
// the most adaptive.ParseRateLimitRemaining reads.
const MaxRemaining = 999_999_999_999_999_999

// Observe records, at t, the reply to a paced call: its HTTP status (a 429
// says the quota is empty) and the remaining count the API reported
// (negative when it reported none). It returns what the pacer knows after
// it. Errors: ErrBadRequest (a status outside [100, 599], a count above
// MaxRemaining), ErrUnknownResource, ErrWrongKind.
func (e *Engine) Observe(t time.Time, resource string, status, remaining int) (Pacing, error) {
	if status < 100 || status > 599 {
		return Pacing{}, fmt.Errorf("%w: status: must be an HTTP status code in [100, 599], got %d", ErrBadRequest, status)
	}
	if remaining > MaxRemaining {
		return Pacing{}, fmt.Errorf("%w: remaining: must be at most %d, got %d", ErrBadRequest, MaxRemaining, remaining)
	}
	pr, err := e.pacerOf(resource, "observe")
	if err != nil || pr == nil {
		return lenientPacing(), err
	}
	pr.p.ObserveAt(t, status, max(remaining, -1))
	st := pr.p.Status(t)
	return Pacing{Wait: st.Wait, Rate: st.Rate, Remaining: st.Remaining}, nil
}

// PacerStatus returns what the pacer of resource knows at t, as Observe
// reports it, without changing anything; ok is false for a resource that
// is not a pacer or has none (its namespace ignores its config).
func (e *Engine) PacerStatus(t time.Time, resource string) (p Pacing, ok bool) {
	r, found := e.res[resource]
	if !found || r.pacer == nil {
		return Pacing{}, false
	}
	st := r.pacer.p.Status(t)
	return Pacing{Wait: st.Wait, Rate: st.Rate, Remaining: st.Remaining}, true
}
