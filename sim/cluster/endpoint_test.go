package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	simpkg "github.com/obol-dev/obol/sim"
)

// Estimate is the figure Run holds against MaxEvents before it runs: a
// budget one under it is refused at once, naming it. Neither the drift nor
// tick-only shipping changes it, and the endpoint's EstimateCluster is
// Estimate of the scenario it would run.
func TestEstimateIsRunsEstimate(t *testing.T) {
	s := Scenario{Resource: resource(t, gcraJS), Nodes: 5, Rate: 100, Duration: 2 * time.Second, Seed: 1}
	est, err := Estimate(s)
	if err != nil || est <= 0 {
		t.Fatalf("Estimate: %d, %v", est, err)
	}
	s.MaxEvents = est - 1
	if _, err := Run(context.Background(), s); !errors.Is(err, ErrTooMuchWork) || !strings.Contains(err.Error(), fmt.Sprintf("about %d events", est)) {
		t.Errorf("Run with a budget of Estimate − 1: %v, want ErrTooMuchWork naming %d events", err, est)
	}
	s.MaxEvents = 0
	for _, d := range []float64{0, 0.2, 1} {
		for _, tick := range []bool{false, true} {
			v := s
			v.Drift, v.TickOnly = &d, tick
			if got, err := Estimate(v); err != nil || got != est {
				t.Errorf("drift %v, tick-only %v: Estimate %d, %v; want %d", d, tick, got, err, est)
			}
		}
	}
	got, err := Endpoint{}.EstimateCluster(simpkg.ClusterScenario{Resource: s.Resource, Nodes: 5, Rate: 100, Duration: 2 * time.Second, Seed: 1})
	if err != nil || got != est {
		t.Errorf("EstimateCluster: %d, %v; want %d", got, err, est)
	}
	if _, err := (Endpoint{}).EstimateCluster(simpkg.ClusterScenario{Resource: s.Resource}); !errors.Is(err, simpkg.ErrScenario) || !strings.Contains(err.Error(), "nodes") {
		t.Errorf("no nodes: %v, want ErrScenario naming nodes", err)
	}
}
