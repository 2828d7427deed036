package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/wire/mpwire"
	"github.com/obol-dev/obol/sim"
	"github.com/obol-dev/obol/sim/cluster"
)

var _ ClusterEstimator = cluster.Endpoint{}

// sweepBodyOf is a small cluster (4 nodes over a limit of 100 per second,
// offered twice the limit, for 3 s) with the sweep's fields after it.
func sweepBodyOf(extra string) string {
	return `{"resource":{"kind":"tiers","tiers":"100,1,1,0"},"nodes":4,"sync_interval_ms":250,"delay_ms":2,"offered_per_s":50,"duration_ms":3000,"seed":7` + extra + `}`
}

// sweepOut is a sweep's reply, its figures as the JSON spells them.
type sweepOut struct {
	Points          []map[string]json.RawMessage `json:"points"`
	TickOnly        map[string]json.RawMessage   `json:"tick_only"`
	TargetOvershoot *float64                     `json:"target_overshoot"`
	Cheapest        map[string]json.RawMessage   `json:"cheapest"`
	CheapestReason  string                       `json:"cheapest_reason"`
}

func sweepReplyOf(t *testing.T, r reply) sweepOut {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("sweep: %d %s", r.status, r.body)
	}
	var out sweepOut
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("sweep reply: %v: %s", err, r.body)
	}
	return out
}

// sameFigures reports the fields of want that got lacks or spells
// otherwise (want: a /v1/simulate/cluster reply, tick_only left out).
func sameFigures(got, want map[string]json.RawMessage) []string {
	var diff []string
	for k, w := range want {
		if k == "tick_only" {
			continue
		}
		if g, ok := got[k]; !ok || string(g) != string(w) {
			diff = append(diff, fmt.Sprintf("%s: %s, want %s", k, g, w))
		}
	}
	return diff
}

func drift(t *testing.T, p map[string]json.RawMessage) float64 {
	t.Helper()
	var d float64
	if err := json.Unmarshal(p["drift"], &d); err != nil {
		t.Fatalf("point %v: drift: %v", p, err)
	}
	return d
}

// Each point of a sweep is, field for field, what /v1/simulate/cluster
// answers for the same body with that drift; tick_only is its tick_only
// for the body as given; the body's drift is swept with the list's; the
// same body gives the same reply; cheapest follows its rule.
func TestSweepPointsAreTheClusterEndpointsFigures(t *testing.T) {
	h := clusterHarness(t)
	h.srv.sim.limit = time.Minute // a loaded machine and the race detector: the runs must finish
	body := sweepBodyOf(`,"drift":0.04,"drifts":[0.2,0.01,0.05,0.01],"target_overshoot":0.05`)
	a := h.post("/v1/simulate/cluster/sweep", body)
	out := sweepReplyOf(t, a)
	if b := h.post("/v1/simulate/cluster/sweep", body); string(b.body) != string(a.body) {
		t.Fatalf("same body, different replies:\n%s\n%s", a.body, b.body)
	}
	var drifts []float64
	for _, p := range out.Points {
		drifts = append(drifts, drift(t, p))
	}
	if fmt.Sprint(drifts) != "[0.01 0.04 0.05 0.2]" {
		t.Fatalf("swept drifts %v, want [0.01 0.04 0.05 0.2] (the list's and the body's, ascending, once each)", drifts)
	}
	for _, p := range out.Points {
		d := drift(t, p)
		var c map[string]json.RawMessage
		r := h.post("/v1/simulate/cluster", sweepBodyOf(fmt.Sprintf(`,"drift":%v`, d)))
		if r.status != 200 {
			t.Fatalf("/v1/simulate/cluster at drift %v: %d %s", d, r.status, r.body)
		}
		if err := json.Unmarshal(r.body, &c); err != nil {
			t.Fatal(err)
		}
		if diff := sameFigures(p, c); len(diff) > 0 {
			t.Errorf("drift %v: the sweep's point differs from /v1/simulate/cluster's figures: %v", d, diff)
		}
		if d == 0.04 {
			var tick map[string]json.RawMessage
			if err := json.Unmarshal(c["tick_only"], &tick); err != nil {
				t.Fatal(err)
			}
			if diff := sameFigures(out.TickOnly, tick); len(diff) > 0 {
				t.Errorf("tick_only differs from /v1/simulate/cluster's for the body: %v", diff)
			}
		}
	}
	// The load is twice the limit: tick-only shipping over-admits more
	// than the tightest drift.
	var tickWorst, tightWorst float64
	json.Unmarshal(out.TickOnly["worst_window_ratio"], &tickWorst)
	json.Unmarshal(out.Points[0]["worst_window_ratio"], &tightWorst)
	if !(tickWorst > tightWorst) {
		t.Errorf("tick-only worst window %v, drift 0.01's %v: want tick-only higher", tickWorst, tightWorst)
	}
	// cheapest: the fewest bytes among the points within 1.05 × the limit.
	var want map[string]json.RawMessage
	var wantBytes float64
	for _, p := range out.Points {
		var w, b float64
		json.Unmarshal(p["worst_window_ratio"], &w)
		json.Unmarshal(p["bytes_per_node_s"], &b)
		if w <= 1.05+ratioSlack && (want == nil || b <= wantBytes) {
			want, wantBytes = p, b
		}
	}
	if out.TargetOvershoot == nil || *out.TargetOvershoot != 0.05 {
		t.Errorf("target_overshoot %v, want 0.05 echoed", out.TargetOvershoot)
	}
	switch {
	case want == nil && out.Cheapest != nil:
		t.Errorf("cheapest %v, but no point is within 1.05 × the limit", out.Cheapest)
	case want != nil && (out.Cheapest == nil || len(sameFigures(out.Cheapest, want)) > 0):
		t.Errorf("cheapest %v, want %v (%s)", out.Cheapest, want, out.CheapestReason)
	case out.CheapestReason == "":
		t.Error("no cheapest_reason")
	}
	t.Logf("cheapest: %s", out.CheapestReason)
}

// Without drifts the default list is swept (the body's drift among it);
// without target_overshoot cheapest is null and the reason says why; a
// MessagePack body gives the JSON body's reply.
func TestSweepDefaultsAndMsgpack(t *testing.T) {
	h := clusterHarness(t)
	h.srv.sim.limit = time.Minute
	body := `{"resource":{"kind":"gcra","burst":20,"count":20,"period":"1s"},"nodes":2,"duration_ms":1000,"drift":0.05}`
	js := h.post("/v1/simulate/cluster/sweep", body)
	out := sweepReplyOf(t, js)
	var drifts []float64
	for _, p := range out.Points {
		drifts = append(drifts, drift(t, p))
	}
	if fmt.Sprint(drifts) != fmt.Sprint(defaultSweepDrifts[:]) {
		t.Errorf("swept %v, want the default list %v", drifts, defaultSweepDrifts)
	}
	if out.Cheapest != nil || !strings.Contains(out.CheapestReason, "no target_overshoot given") || out.TargetOvershoot != nil {
		t.Errorf("no target: cheapest %v, target %v, reason %q", out.Cheapest, out.TargetOvershoot, out.CheapestReason)
	}
	if !strings.Contains(string(js.body), `"cheapest":null`) {
		t.Errorf("cheapest is not null: %s", js.body)
	}
	mp, err := mpwire.AppendFromJSON(nil, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if r := h.do("POST", "/v1/simulate/cluster/sweep", string(mp), "Content-Type: application/msgpack"); string(r.body) != string(js.body) {
		t.Errorf("MessagePack body: %d %s, JSON: %s", r.status, r.body, js.body)
	}
}

func TestSweepBadInput(t *testing.T) {
	h := clusterHarness(t)
	var ds []string
	for i := 1; i <= 16; i++ {
		ds = append(ds, fmt.Sprint(float64(i)/100))
	}
	sixteen := strings.Join(ds, ",")
	cases := []struct {
		body, code, msg string
		status          int
	}{
		{sweepBodyOf(`,"drifts":0.05`), "bad_request", "drifts: must be a JSON array of numbers in [0, 1], got 0.05", 400},
		{sweepBodyOf(`,"drifts":[]`), "bad_request", "drifts: must list at least one drift", 400},
		{sweepBodyOf(`,"drifts":[0.01,2]`), "bad_request", "drifts[1]: must be a number in [0, 1], got 2", 400},
		{sweepBodyOf(`,"drifts":[-0.1]`), "bad_request", "drifts[0]: must be a number in [0, 1], got -0.1", 400},
		{sweepBodyOf(`,"drifts":["0.1"]`), "bad_request", `drifts[0]: must be a number in [0, 1], got "0.1"`, 400},
		{sweepBodyOf(`,"drifts":[` + sixteen + `,0.5]`), "bad_request", "drifts: must list at most 16 drifts, got 17", 400},
		{sweepBodyOf(`,"drifts":[` + sixteen + `],"drift":0.5`), "bad_request", "drifts: must list at most 16 distinct drifts, the body's drift included, got 17", 400},
		{sweepBodyOf(`,"target_overshoot":-0.01`), "bad_request", "target_overshoot: must be in [0, 10]", 400},
		{sweepBodyOf(`,"target_overshoot":"2%"`), "bad_request", "target_overshoot: must be a JSON float64, got string", 400},
		{sweepBodyOf(`,"drift":2`), "bad_request", "drift: must be in [0, 1], got 2", 400},
		{sweepBodyOf(`,"speed":1`), "bad_request", "speed: unknown field; expected one of resource, nodes, sync_interval_ms, drift, delay_ms, loss, offered_per_s, skew, keys, duration_ms, seed, drifts, target_overshoot", 400},
		{`{"resource":{"kind":"tiers","tiers":"100,1,1,0"}}`, "bad_request", "nodes: required field is missing", 400},
		{`{"resource":{"kind":"copies","domain_limit":2},"nodes":3}`, "bad_request", `resource.kind: must be gcra or tiers, got "copies"`, 400},
		// Each run is within /v1/simulate/cluster's budget (about 220,000
		// events), ten of them are not within the sweep's.
		{`{"resource":{"kind":"tiers","tiers":"100,1,1,0"},"nodes":20,"offered_per_s":1000,"duration_ms":10000}`, "too_large", "the sweep's 10 runs (9 drifts and tick-only) are estimated at about 2", 413},
	}
	for _, c := range cases {
		r := h.post("/v1/simulate/cluster/sweep", c.body)
		code, msg := errorReply(t, r.body)
		if r.status != c.status || code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: %d %s %q; want %d %s containing %q", c.body, r.status, code, msg, c.status, c.code, c.msg)
		}
	}
}

// sweeper is a cluster simulator that estimates every run at est events
// and counts the runs it is asked for.
type sweeper struct {
	est  int64
	runs *atomic.Int64
}

func (f sweeper) SimulateCluster(context.Context, sim.ClusterScenario) (sim.ClusterFigures, error) {
	f.runs.Add(1)
	return sim.ClusterFigures{WorstWindowRatio: 1, BytesPerNodeS: 1}, nil
}

func (f sweeper) EstimateCluster(sim.ClusterScenario) (int64, error) { return f.est, nil }

// The sum of the runs' estimates is held against the budget before any
// run starts: one over it runs nothing; one at it runs every run.
func TestSweepEstimatedBeforeItRuns(t *testing.T) {
	h := newHarness(t)
	runs := &atomic.Int64{}
	body := sweepBodyOf(`,"drifts":[0.01,0.02,0.03]`) // 4 runs with tick-only
	h.srv.clusterSim = sweeper{est: maxSweepEvents/4 + 1, runs: runs}
	r := h.post("/v1/simulate/cluster/sweep", body)
	if code, msg := errorReply(t, r.body); r.status != 413 || code != "too_large" || !strings.Contains(msg, fmt.Sprintf("about %d events", 4*(maxSweepEvents/4+1))) || runs.Load() != 0 {
		t.Errorf("over the budget: %d %s %q after %d runs", r.status, code, msg, runs.Load())
	}
	h.srv.clusterSim = sweeper{est: maxSweepEvents / 4, runs: runs}
	if r = h.post("/v1/simulate/cluster/sweep", body); r.status != 200 || runs.Load() != 4 {
		t.Errorf("at the budget: %d %s after %d runs, want 200 after 4", r.status, r.body, runs.Load())
	}
}

// The sweep is one simulation: refused while another runs (429, shared
// with /v1/simulate and /v1/simulate/cluster); one time limit covers its
// runs; without a simulator, or with one that cannot estimate, it is 404.
func TestSweepBounds(t *testing.T) {
	h := clusterHarness(t)
	h.srv.sim.busy.Store(true)
	r := h.post("/v1/simulate/cluster/sweep", sweepBodyOf(""))
	if code, msg := errorReply(t, r.body); r.status != 429 || code != "too_many" || r.header.Get("Retry-After") != "1" || !strings.Contains(msg, "one at a time") {
		t.Errorf("concurrent: %d %s %q", r.status, code, msg)
	}
	h.srv.sim.busy.Store(false)
	h.srv.sim.limit = 1
	r = h.post("/v1/simulate/cluster/sweep", sweepBodyOf(`,"drifts":[0.01,0.1]`))
	if code, msg := errorReply(t, r.body); r.status != 413 || code != "too_large" || !strings.Contains(msg, "time limit of 1ns") || !strings.Contains(msg, "after 0 of its 3 runs") {
		t.Errorf("time limit: %d %s %q", r.status, code, msg)
	}

	h.srv.clusterSim = nil
	r = h.post("/v1/simulate/cluster/sweep", sweepBodyOf(""))
	if code, msg := errorReply(t, r.body); r.status != 404 || code != "not_found" || !strings.Contains(msg, "no cluster simulator") {
		t.Errorf("no simulator: %d %s %q", r.status, code, msg)
	}
	h.srv.clusterSim = sizedCluster{}
	r = h.post("/v1/simulate/cluster/sweep", sweepBodyOf(""))
	if code, msg := errorReply(t, r.body); r.status != 404 || code != "not_found" || !strings.Contains(msg, "ClusterEstimator") {
		t.Errorf("no estimator: %d %s %q", r.status, code, msg)
	}
}

func TestCheapest(t *testing.T) {
	pt := func(d, worst, bytes float64) sweepPoint {
		return sweepPoint{Drift: d, clusterFigures: clusterFigures{WorstWindowRatio: worst, BytesPerNodeS: bytes}}
	}
	target := func(v float64) *float64 { return &v }
	cases := []struct {
		name   string
		points []sweepPoint
		target *float64
		want   float64 // NaN: none
		reason string
	}{
		{name: "no target", points: []sweepPoint{pt(0.01, 1, 10)}, want: math.NaN(), reason: "no target_overshoot given"},
		{name: "none meets it", points: []sweepPoint{pt(0.01, 1.3, 10), pt(0.1, 1.5, 5)}, target: target(0.02), want: math.NaN(),
			reason: "the lowest is 1.3 × at drift 0.01"},
		{name: "the largest that meets it", points: []sweepPoint{pt(0.01, 1.0, 100), pt(0.05, 1.02, 40), pt(0.1, 1.08, 20)}, target: target(0.02), want: 0.05,
			reason: "drift 0.05 sends the fewest bytes"},
		{name: "102 over 100 meets 2%", points: []sweepPoint{pt(0.01, 1.0, 100), pt(0.05, 102.0/100, 40)}, target: target(0.02), want: 0.05},
		{name: "a tie goes to the larger drift", points: []sweepPoint{pt(0.005, 1.0, 30), pt(0.01, 1.0, 30), pt(0.2, 1.5, 10)}, target: target(0), want: 0.01},
		{name: "fewer bytes at a smaller drift win", points: []sweepPoint{pt(0.05, 1.0, 30), pt(0.1, 1.01, 31)}, target: target(0.02), want: 0.05},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, reason := cheapest(c.points, c.target)
			switch {
			case math.IsNaN(c.want) && got != nil:
				t.Errorf("cheapest %v, want none", got.Drift)
			case !math.IsNaN(c.want) && (got == nil || got.Drift != c.want):
				t.Errorf("cheapest %v, want %v (%s)", got, c.want, reason)
			}
			if !strings.Contains(reason, c.reason) {
				t.Errorf("reason %q, want it to contain %q", reason, c.reason)
			}
		})
	}
}
