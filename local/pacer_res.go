package local

import (
	"fmt"
	"time"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/config"
)

// pacer_res.go is a pacer resource's state and calls: its one
// adaptive.Pacer (see pacer.go), Pace, Observe and PacerStatus.

// pacerRes is the state of a resource of kind pacer: its pacer, and the
// config it was made with (a reload that changes it starts a fresh one).
// A resource whose namespace ignores its config has no pacer (p nil): it
// never asks anyone to wait.
type pacerRes struct {
	p   *adaptive.Pacer
	cfg adaptive.PacerConfig
	perAgent
}

var _ kindRes = (*pacerRes)(nil)

// pacerFromConfig returns the state of a pacer resource, without a pacer
// when its namespace ignores its config.
func pacerFromConfig(rc *config.Resource, ignore bool) *pacerRes {
	if ignore {
		return &pacerRes{}
	}
	cfg := pacerConfig(rc)
	p, err := adaptive.NewPacer(cfg)
	if err != nil {
		panic(fmt.Sprintf("local: pacer config %+v: %v", rc, err)) // config's validation refuses what adaptive would
	}
	return &pacerRes{p: p, cfg: cfg}
}

// pacerOf returns the pacer of resource, nil for a lenient one.
func (e *Engine) pacerOf(resource, call string) (*adaptive.Pacer, error) {
	r, ok := e.res[resource]
	if !ok {
		return nil, e.unconfigured(resource)
	}
	pr, ok := kindOf[*pacerRes](r)
	if !ok {
		return nil, wrongKind(r, call)
	}
	return pr.p, nil
}

// Pace returns how long the caller should wait, from t, before its next
// call to the API the pacer resource stands for, and counts that call as
// made at t plus the wait. Errors: ErrUnknownResource, ErrWrongKind (the
// resource is not a pacer).
func (e *Engine) Pace(t time.Time, resource string) (Pacing, error) {
	p, err := e.pacerOf(resource, "pace")
	if err != nil || p == nil {
		return lenientPacing(), err
	}
	d := p.Delay(t)
	st := p.Status(t)
	return Pacing{Wait: d, Rate: st.Rate, Remaining: st.Remaining}, nil
}

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
	p, err := e.pacerOf(resource, "observe")
	if err != nil || p == nil {
		return lenientPacing(), err
	}
	p.ObserveAt(t, status, max(remaining, -1))
	st := p.Status(t)
	return Pacing{Wait: st.Wait, Rate: st.Rate, Remaining: st.Remaining}, nil
}

// PacerStatus returns what the pacer of resource knows at t, as Observe
// reports it, without changing anything; ok is false for a resource that
// is not a pacer or has none (its namespace ignores its config).
func (e *Engine) PacerStatus(t time.Time, resource string) (p Pacing, ok bool) {
	pr, ok := kindOf[*pacerRes](e.res[resource])
	if !ok || pr.p == nil {
		return Pacing{}, false
	}
	st := pr.p.Status(t)
	return Pacing{Wait: st.Wait, Rate: st.Rate, Remaining: st.Remaining}, true
}

// state reports nothing: a pacer has no keys, and its status is
// PacerStatus.
func (pr *pacerRes) state(string, time.Time) KeyState { return KeyState{} }

// sweep does nothing: a pacer forgets nothing with time.
func (pr *pacerRes) sweep(time.Time) {}

func (pr *pacerRes) load() (keys, holds, peerHolds int) { return 0, 0, 0 }

// adopt keeps old's pacer when the pacer's config is unchanged. A changed
// config (strategy, quota, period, a sleep, the multiplier or the jitter)
// keeps the fresh pacer: what the old one learned was fitted to the old
// settings.
func (pr *pacerRes) adopt(old kindRes, _ *config.Resource) kindRes {
	if o := old.(*pacerRes); pr.p != nil && o.p != nil && pr.cfg == o.cfg {
		return o
	}
	return pr
}
