package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/wire/mpwire"
	"github.com/obol-dev/obol/sim"
)

// simcluster.go is POST /v1/simulate/cluster: a virtual-time simulation of
// N agents sharing one resource, run twice, with drift shipping and
// tick-only, under /v1/simulate's bounds. The simulator itself (package
// sim/cluster, which runs the real gossip and reconcile code) is reached
// through ClusterSimulator, so that api links neither it nor memberlist.

// ClusterSimulator runs the cluster simulations of POST
// /v1/simulate/cluster (Options.ClusterSimulator); the agent passes
// sim/cluster's Endpoint. SimulateCluster runs sc once and returns its
// figures, or an error: one wrapping sim.ErrScenario for a scenario it
// refuses (the text after it names the field), one wrapping
// sim.ErrTooMuchWork over sc.MaxEvents, sc.Yield's error as it is. It must
// be safe for concurrent use (one server runs one simulation at a time, but
// servers may share a simulator). One that is also a ClusterEstimator
// serves POST /v1/simulate/cluster/sweep too (simsweep.go).
type ClusterSimulator interface {
	SimulateCluster(ctx context.Context, sc sim.ClusterScenario) (sim.ClusterFigures, error)
}

// clusterSkews are the values of the body's skew field.
var clusterSkews = [...]string{"even", "hot", "zipf"}

const (
	// maxClusterNodes bounds a cluster simulation's size.
	maxClusterNodes = 200
	// maxClusterDuration bounds its simulated time.
	maxClusterDuration = 60_000 // ms
	// maxClusterKeys bounds its keys.
	maxClusterKeys = 100_000
	// maxClusterEvents is each of the two runs' work budget (requests,
	// ticks and merges): about a second of CPU here.
	maxClusterEvents = 1_000_000
	// freeAfterEvents: after runs of this many events together, or runs
	// stopped at the time limit, the heap is given back to the system.
	freeAfterEvents = 100_000
)

// clusterBody is a /v1/simulate/cluster body (JSON). Pointers tell an
// absent field from a zero.
type clusterBody struct {
	Resource       json.RawMessage `json:"resource"`
	Nodes          *int            `json:"nodes"`
	SyncIntervalMs *int64          `json:"sync_interval_ms"`
	Drift          *float64        `json:"drift"`
	DelayMs        *float64        `json:"delay_ms"`
	Loss           *float64        `json:"loss"`
	OfferedPerS    *float64        `json:"offered_per_s"`
	Skew           *string         `json:"skew"`
	Keys           *int            `json:"keys"`
	DurationMs     *int64          `json:"duration_ms"`
	Seed           *uint64         `json:"seed"`
}

// clusterFields are the body's fields, for the unknown-field error.
const clusterFields = "resource, nodes, sync_interval_ms, drift, delay_ms, loss, offered_per_s, skew, keys, duration_ms, seed"

// decodeCluster reads a cluster simulation body into a scenario (its
// Resource parsed and normalized). Every error names the field; the
// simulator checks the rest when it runs.
func decodeCluster(data []byte) (sim.ClusterScenario, error) {
	var b clusterBody
	if err := decodeClusterJSON(data, &b, clusterFields); err != nil {
		return sim.ClusterScenario{}, err
	}
	return b.scenario()
}

// decodeClusterJSON decodes data, one JSON object, into v (a body struct
// whose fields are fields, for the unknown-field error), its errors worded
// as field errors.
func decodeClusterJSON(data []byte, v any, fields string) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return clusterJSONError(err, fields)
	}
	if d.More() {
		return &fieldError{Field: "body", Msg: "must be one JSON object, got more after it"}
	}
	return nil
}

// scenario checks b's fields and returns its scenario (its Resource parsed
// and normalized). Every error names the field.
func (b *clusterBody) scenario() (sim.ClusterScenario, error) {
	var sc sim.ClusterScenario
	if len(b.Resource) == 0 || string(b.Resource) == "null" {
		return sc, &fieldError{Field: "resource", Msg: "required field is missing"}
	}
	if len(b.Resource) > maxSimResource {
		return sc, tooLarge("resource: %d bytes of config is over the limit of %d", len(b.Resource), maxSimResource)
	}
	if b.Nodes == nil {
		return sc, &fieldError{Field: "nodes", Msg: "required field is missing"}
	}
	if *b.Nodes < 1 || *b.Nodes > maxClusterNodes {
		return sc, &fieldError{Field: "nodes", Msg: fmt.Sprintf("must be 1 to %d, got %d", maxClusterNodes, *b.Nodes)}
	}
	sc.Nodes = *b.Nodes
	if v := b.SyncIntervalMs; v != nil {
		if *v < 1 || *v > 60_000 {
			return sc, &fieldError{Field: "sync_interval_ms", Msg: fmt.Sprintf("must be 1 to 60000, got %d", *v)}
		}
		sc.SyncInterval = time.Duration(*v) * time.Millisecond
	}
	if v := b.Drift; v != nil {
		if !(*v >= 0 && *v <= 1) {
			return sc, &fieldError{Field: "drift", Msg: fmt.Sprintf("must be in [0, 1], got %g", *v)}
		}
		sc.Drift = v
	}
	if v := b.DelayMs; v != nil {
		if !(*v >= 0 && *v <= 10_000) {
			return sc, &fieldError{Field: "delay_ms", Msg: fmt.Sprintf("must be 0 to 10000, got %g", *v)}
		}
		d := time.Duration(*v * float64(time.Millisecond))
		sc.Delay = &d
	}
	if v := b.Loss; v != nil {
		if !(*v >= 0 && *v < 1) {
			return sc, &fieldError{Field: "loss", Msg: fmt.Sprintf("must be in [0, 1), got %g", *v)}
		}
		sc.Loss = *v
	}
	if v := b.OfferedPerS; v != nil {
		if !(*v > 0 && *v <= 1e6) {
			return sc, &fieldError{Field: "offered_per_s", Msg: fmt.Sprintf("must be > 0 and at most 1000000 (requests per second per node), got %g", *v)}
		}
		sc.Rate = *v
	}
	if v := b.Skew; v != nil {
		if !slices.Contains(clusterSkews[:], *v) {
			return sc, &fieldError{Field: "skew", Msg: fmt.Sprintf("must be %q, %q or %q, got %q", clusterSkews[0], clusterSkews[1], clusterSkews[2], *v)}
		}
		sc.Skew = *v
	}
	if v := b.Keys; v != nil {
		if *v < 1 || *v > maxClusterKeys {
			return sc, &fieldError{Field: "keys", Msg: fmt.Sprintf("must be 1 to %d, got %d", maxClusterKeys, *v)}
		}
		sc.Keys = *v
	}
	if v := b.DurationMs; v != nil {
		if *v < 100 || *v > maxClusterDuration {
			return sc, &fieldError{Field: "duration_ms", Msg: fmt.Sprintf("must be 100 to %d, got %d", maxClusterDuration, *v)}
		}
		sc.Duration = time.Duration(*v) * time.Millisecond
	}
	if b.Seed != nil {
		sc.Seed = *b.Seed
	}
	res, err := config.ParseResource(b.Resource)
	if err != nil {
		return sc, resourceProblems(err)
	}
	sc.Resource = res
	return sc, nil
}

// clusterJSONError words encoding/json's errors as field errors; fields
// lists the body's fields, for the unknown-field error.
func clusterJSONError(err error, fields string) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return &fieldError{Field: te.Field, Msg: fmt.Sprintf("must be a JSON %s, got %s", te.Type, te.Value)}
	case errors.As(err, &se):
		return &fieldError{Field: "body", Msg: fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, err)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &fieldError{Field: f, Msg: "unknown field; expected one of " + fields}
	}
	return &fieldError{Field: "body", Msg: err.Error()}
}

// clusterFigures is one run's reply.
type clusterFigures struct {
	WorstWindowRatio   float64 `json:"worst_window_ratio"`
	MeanWindowRatio    float64 `json:"mean_window_ratio"`
	FalseDenials       int     `json:"false_denials"`
	ConvergenceP50Ms   float64 `json:"convergence_p50_ms"`
	ConvergenceP99Ms   float64 `json:"convergence_p99_ms"`
	Unconverged        int     `json:"unconverged"`
	BytesPerNodeS      float64 `json:"bytes_per_node_s"`
	DatagramsPerNodeS  float64 `json:"datagrams_per_node_s"`
	BytesPerHitPerPeer float64 `json:"bytes_per_hit_per_peer"`
	MergesPerNodeS     float64 `json:"merges_per_node_s"`
	Requests           int     `json:"requests"`
	Grants             int     `json:"grants"`
}

func figures(r sim.ClusterFigures) clusterFigures {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return clusterFigures{
		WorstWindowRatio: r.WorstWindowRatio, MeanWindowRatio: r.MeanWindowRatio, FalseDenials: r.FalseDenials,
		ConvergenceP50Ms: ms(r.ConvergenceP50), ConvergenceP99Ms: ms(r.ConvergenceP99), Unconverged: r.Unconverged,
		BytesPerNodeS: r.BytesPerNodeS, DatagramsPerNodeS: r.DatagramsPerNodeS, BytesPerHitPerPeer: r.BytesPerHitPerPeer,
		MergesPerNodeS: r.MergesPerNodeS, Requests: r.Requests, Grants: r.Grants,
	}
}

// POST /v1/simulate/cluster {"resource": <config>, "nodes": N, ...} (JSON, or
// MessagePack read as JSON)
// → the figures of drift shipping, with "tick_only": the same for
// tick-only shipping. Bounds as /v1/simulate: one simulation at a time per
// agent (429 too_many, shared with /v1/simulate), each run's work estimated
// before it starts (413 too_large over maxClusterEvents), the time limit
// over both runs (413 too_large), a low-priority thread and the same
// yields between slices of work.
//
// Without Options.ClusterSimulator the endpoint is 404 not_found, saying
// so.
func (s *Server) simulateCluster(ctx *fasthttp.RequestCtx, _ params) {
	if s.clusterSim == nil {
		s.fail(ctx, &apiError{status: fasthttp.StatusNotFound, code: codeNotFound,
			msg: "this server runs no cluster simulator (Options.ClusterSimulator)"})
		return
	}
	s.oneSimulation(ctx, s.runClusterSimulation)
}

// readClusterBody reads a cluster simulation's body as JSON: a MessagePack
// body is turned into the JSON object it spells.
func readClusterBody(ctx *fasthttp.RequestCtx) ([]byte, error) {
	body, f, err := readBody(ctx)
	if err != nil || f != formatMsgpack {
		return body, err
	}
	var rd mpwire.Reader
	rd.Reset(body)
	if body, err = rd.AppendJSON(nil, "body", 0); err == nil {
		err = rd.End()
	}
	return body, err
}

func (s *Server) runClusterSimulation(ctx *fasthttp.RequestCtx) {
	pace := s.sim.pace()
	body, err := readClusterBody(ctx)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	sc, err := decodeCluster(body)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	sc = bounded(sc, pace)
	var out struct {
		clusterFigures
		TickOnly clusterFigures `json:"tick_only"`
	}
	var events int64
	defer func() {
		if events >= freeAfterEvents {
			// A large run leaves its heap (up to about 200 MB) with the
			// process for minutes otherwise; this GC runs on the
			// simulation's own low-priority thread.
			debug.FreeOSMemory()
		}
	}()
	for i, tick := range []bool{false, true} {
		sc.TickOnly = tick
		r, err := s.clusterSim.SimulateCluster(ctx, sc)
		events += r.Events
		if errors.Is(err, sim.ErrTimeLimit) || errors.Is(err, sim.ErrWallLimit) {
			events = freeAfterEvents // stopped at its limit: as large as runs get
		}
		if err != nil {
			s.fail(ctx, clusterRunError(pace, err, "cluster simulation", "", "simulate fewer nodes, a lower rate or a shorter duration"))
			return
		}
		if i == 0 {
			out.clusterFigures = figures(r)
		} else {
			out.TickOnly = figures(r)
		}
	}
	js, err := json.Marshal(out)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(contentTypes[formatJSON])
	ctx.Response.SetBodyRaw(js)
}

// clusterRunError is the reply to err, a cluster run's error (not nil):
// 400 for a scenario the simulator refuses, 413 over the work budget or
// stopped by pace (what names the simulation, done its progress, hint what
// to simulate instead, as simStopped), else an internal error.
func clusterRunError(pace *sim.Pace, err error, what, done, hint string) error {
	switch {
	case errors.Is(err, sim.ErrScenario):
		return &fieldError{Field: "", Msg: strings.TrimPrefix(err.Error(), sim.ErrScenario.Error()+": ")}
	case errors.Is(err, sim.ErrTooMuchWork):
		return tooLarge("%s; the endpoint's budget is %d events per run", strings.TrimPrefix(err.Error(), sim.ErrTooMuchWork.Error()+": "), maxClusterEvents)
	case errors.Is(err, sim.ErrTimeLimit), errors.Is(err, sim.ErrWallLimit):
		return simStopped(pace, err, what, done, hint)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// bounded is sc as the agent runs it: within the endpoint's event budget,
// with the agent's default gossip label (its bytes count in every
// datagram, so the same body gives the same figures on both endpoints),
// yielding to pace.
func bounded(sc sim.ClusterScenario, pace *sim.Pace) sim.ClusterScenario {
	sc.MaxEvents = maxClusterEvents
	sc.Label = "obol"
	sc.Yield = pace.Step
	return sc
}
