package sim

import (
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// engine.go runs a single-node simulation (POST /v1/simulate): simulated
// requests decided one after another by a fresh engine that holds only the
// simulated resource, at virtual instants.

// Base is the virtual instant a request's AtMs counts from: a fixed
// instant, so that a simulation's decisions depend on its requests alone.
var Base = time.Unix(1_700_000_000, 0)

// ResourceName is the name the simulated resource has in its engine.
const ResourceName = "sim/resource"

// YieldEvery is how many simulated requests Run decides between two calls
// of its step function.
const YieldEvery = 64

// Request is one simulated request: a use of copies of the resource by
// domain (at least minCopies of them) at Base + AtMs, or, with Refund, a
// refund of copies (gcra).
type Request struct {
	AtMs      int64
	Domain    string
	Copies    int
	MinCopies int
	Refund    bool
}

// Outcome is what the engine answered one request.
type Outcome struct {
	// At is the request's virtual instant.
	At time.Time
	// Err is the engine's refusal (a config.Problem such as
	// cost_over_burst, or another error); Decision and Remaining are
	// then unset.
	Err error
	// Decision is the decision of a request that is not a refund.
	Decision local.Decision
	// Remaining is what a refund left in the bucket.
	Remaining int

	eng    *local.Engine
	domain string
}

// State is the request's key's state at its instant, after the request, as
// GET /v1/state would show it.
func (o *Outcome) State() (local.KeyState, error) {
	return o.eng.State(o.At, ResourceName, o.domain)
}

// Run decides reqs in order on a fresh engine holding only res (parsed and
// normalized; a kind that makes rate decisions), and calls visit after each
// with its index and outcome (reused from one call to the next). Every
// YieldEvery requests it calls step with the index of the next request; an
// error from step or visit stops the run and is returned as it is.
func Run(res *config.Resource, reqs []Request, step func(next int) error, visit func(i int, o *Outcome) error) error {
	eng := local.New(&config.Config{Resources: map[string]*config.Resource{ResourceName: res}})
	o := &Outcome{eng: eng}
	for i, r := range reqs {
		if i > 0 && i%YieldEvery == 0 {
			if err := step(i); err != nil {
				return err
			}
		}
		o.At = Base.Add(time.Duration(r.AtMs) * time.Millisecond)
		o.domain = r.Domain
		o.Remaining = 0
		if r.Refund {
			o.Remaining, o.Err = eng.Refund(o.At, ResourceName, r.Domain, r.Copies)
		} else {
			o.Err = eng.Decide(&o.Decision, o.At, ResourceName, r.Domain, r.Copies, r.MinCopies)
		}
		if err := visit(i, o); err != nil {
			return err
		}
	}
	return nil
}
