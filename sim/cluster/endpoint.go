package cluster

import (
	"context"

	simpkg "github.com/obol-dev/obol/sim"
)

// endpoint.go runs a cluster simulation as POST /v1/simulate/cluster asks
// for one (package sim's ClusterScenario), for package api's
// ClusterSimulator, and estimates its work before it runs, for
// ClusterEstimator (POST /v1/simulate/cluster/sweep sums its runs' first).

// Endpoint runs the endpoint's cluster simulations. Its zero value is ready;
// it is safe for concurrent use (each run is its own).
type Endpoint struct{}

// SimulateCluster runs sc once (Run) and returns its figures. Its errors
// are Run's: one wrapping ErrScenario (simpkg.ErrScenario) for a scenario
// Validate refuses, one wrapping ErrTooMuchWork over sc.MaxEvents, and
// sc.Yield's error as it is.
func (Endpoint) SimulateCluster(ctx context.Context, sc simpkg.ClusterScenario) (simpkg.ClusterFigures, error) {
	r, err := Run(ctx, scenario(sc))
	if err != nil {
		return simpkg.ClusterFigures{}, err
	}
	return figures(r), nil
}

// EstimateCluster returns the work SimulateCluster(ctx, sc) would be
// estimated at before it runs (Estimate), the figure held against
// sc.MaxEvents, without running anything: a caller that runs several
// simulations sums them first. Its error wraps ErrScenario for a scenario
// Validate refuses.
func (Endpoint) EstimateCluster(sc simpkg.ClusterScenario) (int64, error) {
	return Estimate(scenario(sc))
}

// scenario is the simulator's Scenario of the endpoint's sc.
func scenario(sc simpkg.ClusterScenario) Scenario {
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
	return s
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
