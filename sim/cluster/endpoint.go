package cluster

import (
	"context"

	simpkg "github.com/obol-dev/obol/sim"
)

// endpoint.go runs a cluster simulation as POST /v1/simulate/cluster asks
// for one (package sim's ClusterScenario), for package api's
// ClusterSimulator.

// Endpoint runs the endpoint's cluster simulations. Its zero value is ready;
// it is safe for concurrent use (each run is its own).
type Endpoint struct{}

// SimulateCluster runs sc once (Run) and returns its figures. Its errors
// are Run's: one wrapping ErrScenario (simpkg.ErrScenario) for a scenario
// Validate refuses, one wrapping ErrTooMuchWork over sc.MaxEvents, and
// sc.Yield's error as it is.
func (Endpoint) SimulateCluster(ctx context.Context, sc simpkg.ClusterScenario) (simpkg.ClusterFigures, error) {
	s := Scenario{
		Resource: sc.Resource, Nodes: sc.Nodes, SyncInterval: sc.SyncInterval, Drift: sc.Drift,
		Loss: sc.Loss, Rate: sc.Rate, Skew: sc.Skew, Keys: sc.Keys, Duration: sc.Duration, Seed: sc.Seed,
		TickOnly: sc.TickOnly, Label: sc.Label, MaxEvents: sc.MaxEvents,
	}
	switch {
	case sc.Delay == nil:
		s.Delay = DefaultDelay
	case *sc.Delay == 0:
		s.Delay = NoDelay
	default:
		s.Delay = *sc.Delay
	}
	if sc.Yield != nil {
		s.Yield = func(int64) error { return sc.Yield() }
	}
	r, err := Run(ctx, s)
	if err != nil {
		return simpkg.ClusterFigures{}, err
	}
	return figures(r), nil
}

// figures are the endpoint's figures of r.
func figures(r Result) simpkg.ClusterFigures {
	return simpkg.ClusterFigures{
		WorstWindowRatio: r.WorstWindowRatio, MeanWindowRatio: r.MeanWindowRatio, FalseDenials: r.FalseDenials,
		ConvergenceP50: r.ConvergenceP50, ConvergenceP99: r.ConvergenceP99, Unconverged: r.Unconverged,
		BytesPerNodeS: r.BytesPerNodeS, DatagramsPerNodeS: r.DatagramsPerNodeS, BytesPerHitPerPeer: r.BytesPerHitPerPeer,
		MergesPerNodeS: r.MergesPerNodeS, Requests: r.Requests, Grants: r.Grants, Events: r.Events,
	}
}
