package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/wire"
	"github.com/obol-dev/obol/sim"
)

// simsweep.go is POST /v1/simulate/cluster/sweep: the cluster of a
// /v1/simulate/cluster body simulated at each drift of a list, and once
// with tick-only shipping, in one request under one simulation's bounds,
// and the cheapest drift that keeps the worst window within a target.

// ClusterEstimator estimates a cluster simulation's work before it runs:
// EstimateCluster returns the events the simulator would estimate sc at
// (the figure it holds against sc.MaxEvents), running nothing, or an error
// wrapping sim.ErrScenario for a scenario it refuses. It must be safe for
// concurrent use. The sweep sums it over its runs before the first starts,
// so Options.ClusterSimulator must implement it for the sweep to be served
// (sim/cluster's Endpoint does).
type ClusterEstimator interface {
	EstimateCluster(sc sim.ClusterScenario) (int64, error)
}

const (
	// maxSweepDrifts bounds the drifts of one sweep, the body's drift
	// included.
	maxSweepDrifts = 16
	// maxSweepEvents is a sweep's work budget, the sum of its runs'
	// estimates: that of one /v1/simulate/cluster at its largest (two runs
	// of maxClusterEvents), so a sweep costs the agent no more than one
	// cluster simulation may.
	maxSweepEvents = 2 * maxClusterEvents
	// maxTargetOvershoot bounds target_overshoot.
	maxTargetOvershoot = 10
	// ratioSlack absorbs the rounding of a window ratio compared with
	// 1 + target (102 grants over a limit of 100 meet a target of 0.02).
	ratioSlack = 1e-9
)

// defaultSweepDrifts are the drifts swept when the body lists none.
var defaultSweepDrifts = [...]float64{0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2}

// sweepBody is a /v1/simulate/cluster/sweep body: a cluster body and the
// sweep's own fields.
type sweepBody struct {
	clusterBody
	Drifts          json.RawMessage `json:"drifts"`
	TargetOvershoot *float64        `json:"target_overshoot"`
}

// sweepFields are the sweep body's fields, for the unknown-field error.
const sweepFields = clusterFields + ", drifts, target_overshoot"

// sweep is a decoded sweep body.
type sweep struct {
	sc     sim.ClusterScenario // the body's cluster, its drift as the body gives it (nil: the resource's)
	drifts []float64           // ascending, distinct, the body's drift among them
	target *float64            // nil: none given
}

// decodeSweep reads a sweep body (JSON). Every error names the field and
// what it expected.
func decodeSweep(data []byte) (*sweep, error) {
	var b sweepBody
	if err := decodeClusterJSON(data, &b, sweepFields); err != nil {
		return nil, err
	}
	sw := &sweep{target: b.TargetOvershoot}
	var err error
	if sw.drifts, err = sweepDrifts(b.Drifts, b.Drift); err != nil {
		return nil, err
	}
	if t := b.TargetOvershoot; t != nil && !(*t >= 0 && *t <= maxTargetOvershoot) {
		return nil, &fieldError{Field: "target_overshoot", Msg: fmt.Sprintf(
			"must be in [0, %d] (a fraction of the limit: 0.02 = at most 2%% over it), got %g", maxTargetOvershoot, *t)}
	}
	if sw.sc, err = b.scenario(); err != nil {
		return nil, err
	}
	return sw, nil
}

// sweepDrifts returns the drifts to sweep, ascending and distinct: those
// of raw (the body's "drifts"; absent or null: defaultSweepDrifts) and the
// body's drift when it gives one.
func sweepDrifts(raw json.RawMessage, drift *float64) ([]float64, error) {
	var ds []float64
	if len(raw) == 0 || string(raw) == "null" {
		ds = slices.Clone(defaultSweepDrifts[:])
	} else {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, &fieldError{Field: "drifts", Msg: "must be a JSON array of numbers in [0, 1], got " + wire.Snippet(raw)}
		}
		switch {
		case len(items) == 0:
			return nil, &fieldError{Field: "drifts", Msg: "must list at least one drift, got an empty array (leave it out for the default list)"}
		case len(items) > maxSweepDrifts:
			return nil, &fieldError{Field: "drifts", Msg: fmt.Sprintf("must list at most %d drifts, got %d", maxSweepDrifts, len(items))}
		}
		for i, it := range items {
			var d float64
			if err := json.Unmarshal(it, &d); err != nil || !(d >= 0 && d <= 1) {
				return nil, &fieldError{Field: fmt.Sprintf("drifts[%d]", i), Msg: "must be a number in [0, 1], got " + wire.Snippet(it)}
			}
			ds = append(ds, d)
		}
	}
	if drift != nil && *drift >= 0 && *drift <= 1 { // out of range: the cluster body's check names it
		ds = append(ds, *drift)
	}
	slices.Sort(ds)
	ds = slices.Compact(ds)
	if len(ds) > maxSweepDrifts {
		return nil, &fieldError{Field: "drifts", Msg: fmt.Sprintf("must list at most %d distinct drifts, the body's drift included, got %d", maxSweepDrifts, len(ds))}
	}
	return ds, nil
}

// sweepPoint is one drift's figures.
type sweepPoint struct {
	Drift float64 `json:"drift"`
	clusterFigures
}

// sweepReply is the sweep's reply.
type sweepReply struct {
	Points          []sweepPoint   `json:"points"`
	TickOnly        clusterFigures `json:"tick_only"`
	TargetOvershoot *float64       `json:"target_overshoot,omitempty"`
	Cheapest        *sweepPoint    `json:"cheapest"`
	CheapestReason  string         `json:"cheapest_reason"`
}

// cheapest returns the point that meets target (worst_window_ratio ≤ 1 +
// target) with the fewest bytes per node, the larger drift of two that
// send as many, or nil; and why, in words.
func cheapest(points []sweepPoint, target *float64) (*sweepPoint, string) {
	if target == nil {
		return nil, "no target_overshoot given: give one (0.02 = at most 2% over the limit) for the cheapest drift that meets it"
	}
	bound := 1 + *target
	var best, tightest *sweepPoint
	for i := range points {
		p := &points[i]
		if tightest == nil || p.WorstWindowRatio < tightest.WorstWindowRatio {
			tightest = p
		}
		if p.WorstWindowRatio > bound+ratioSlack {
			continue
		}
		if best == nil || p.BytesPerNodeS <= best.BytesPerNodeS { // ascending drifts: a tie goes to the larger
			best = p
		}
	}
	if best == nil {
		return nil, fmt.Sprintf("no drift swept keeps the worst window within %g × the limit: the lowest is %.4g × at drift %g; try smaller drifts (0 ships every hit at once), a shorter sync interval or a shorter network delay",
			bound, tightest.WorstWindowRatio, tightest.Drift)
	}
	return best, fmt.Sprintf("drift %g sends the fewest bytes per node (%.4g per second) of the drifts whose worst window is within %g × the limit (its own: %.4g ×)",
		best.Drift, best.BytesPerNodeS, bound, best.WorstWindowRatio)
}

// POST /v1/simulate/cluster/sweep {<a /v1/simulate/cluster body>,
// "drifts": [...], "target_overshoot": 0.02} (JSON, or MessagePack read as
// JSON) → {"points": [{"drift", <figures>}, ...], "tick_only": <figures>,
// "target_overshoot", "cheapest": <point> or null, "cheapest_reason"}.
// Each point is what /v1/simulate/cluster answers for the same body with
// that drift, and tick_only its tick_only for the body as given. The drifts
// are the list's (default defaultSweepDrifts), with the body's drift when
// it has one, ascending and distinct, at most maxSweepDrifts.
//
// Bounds: the sweep is one simulation (one at a time per agent, 429
// too_many, shared with the other simulations); the work of all its runs
// is estimated before the first starts (ClusterEstimator) and a sum over
// maxSweepEvents is 413 too_large; one time limit covers every run (413
// too_large); a low-priority thread and the same yields. Without
// Options.ClusterSimulator, or with one that does not estimate work, the
// endpoint is 404 not_found, saying so.
func (s *Server) simulateClusterSweep(ctx *fasthttp.RequestCtx, _ params) {
	if s.clusterSim == nil {
		s.fail(ctx, &apiError{status: fasthttp.StatusNotFound, code: codeNotFound,
			msg: "this server runs no cluster simulator (Options.ClusterSimulator)"})
		return
	}
	est, ok := s.clusterSim.(ClusterEstimator)
	if !ok {
		s.fail(ctx, &apiError{status: fasthttp.StatusNotFound, code: codeNotFound,
			msg: "this server's cluster simulator does not estimate a simulation's work before it runs (ClusterEstimator), which a sweep needs"})
		return
	}
	s.oneSimulation(ctx, func(ctx *fasthttp.RequestCtx) { s.runClusterSweep(ctx, est) })
}

// sweepHint is what a 413 of the sweep suggests.
const sweepHint = "sweep fewer drifts, or simulate fewer nodes or keys, a lower rate or a shorter duration"

func (s *Server) runClusterSweep(ctx *fasthttp.RequestCtx, est ClusterEstimator) {
	pace := s.sim.pace()
	body, err := readClusterBody(ctx)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	sw, err := decodeSweep(body)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	sc := bounded(sw.sc, pace)
	// The runs: one per drift, then tick-only as the body gives it.
	runs := make([]sim.ClusterScenario, 0, len(sw.drifts)+1)
	for _, d := range sw.drifts {
		r := sc
		r.Drift = &d
		runs = append(runs, r)
	}
	tick := sc
	tick.TickOnly = true
	runs = append(runs, tick)

	var total int64
	for _, r := range runs {
		e, err := est.EstimateCluster(r)
		if err != nil {
			s.fail(ctx, clusterRunError(pace, err, "cluster sweep", "", sweepHint))
			return
		}
		total += e
	}
	if total > maxSweepEvents {
		s.fail(ctx, tooLarge("the sweep's %d runs (%d drifts and tick-only) are estimated at about %d events (requests, ticks, merges and keys held) in all, over the sweep's budget of %d; %s",
			len(runs), len(sw.drifts), total, maxSweepEvents, sweepHint))
		return
	}

	var events int64
	defer func() {
		if events >= freeAfterEvents {
			debug.FreeOSMemory() // as /v1/simulate/cluster's
		}
	}()
	out := sweepReply{Points: make([]sweepPoint, 0, len(sw.drifts)), TargetOvershoot: sw.target}
	for i, r := range runs {
		f, err := s.clusterSim.SimulateCluster(ctx, r)
		events += f.Events
		if errors.Is(err, sim.ErrTimeLimit) || errors.Is(err, sim.ErrWallLimit) {
			events = freeAfterEvents
		}
		if err != nil {
			s.fail(ctx, clusterRunError(pace, err, "cluster sweep", fmt.Sprintf(" after %d of its %d runs", i, len(runs)), sweepHint))
			return
		}
		if r.TickOnly {
			out.TickOnly = figures(f)
		} else {
			out.Points = append(out.Points, sweepPoint{Drift: *r.Drift, clusterFigures: figures(f)})
		}
	}
	out.Cheapest, out.CheapestReason = cheapest(out.Points, sw.target)
	js, err := json.Marshal(out)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(contentTypes[formatJSON])
	ctx.Response.SetBodyRaw(js)
}
