package api

import (
	"context"
	"encoding/json"
	rtmetrics "runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/internal/wire/mpwire"
	"github.com/obol-dev/obol/sim"
	"github.com/obol-dev/obol/sim/cluster"
)

const clusterGCRA = `"resource":{"kind":"gcra","burst":100,"count":100,"period":"1s","drift":0.05}`

// clusterHarness is a harness whose server runs the agent's cluster
// simulator.
func clusterHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.srv.clusterSim = cluster.Endpoint{}
	return h
}

// Without a cluster simulator the endpoint is 404 not_found, saying so;
// /v1/simulate still runs.
func TestSimulateClusterWithoutSimulator(t *testing.T) {
	h := newHarness(t)
	r := h.post("/v1/simulate/cluster", `{`+clusterGCRA+`,"nodes":3}`)
	if code, msg := errorReply(t, r.body); r.status != 404 || code != "not_found" || !strings.Contains(msg, "no cluster simulator") {
		t.Errorf("no simulator: %d %s %q", r.status, code, msg)
	}
	if r = h.post("/v1/simulate", simBodyOf("5,1,1,0", 1, 3)); r.status != 200 {
		t.Errorf("/v1/simulate: %d %s", r.status, r.body)
	}
}

// clusterReply decodes a 200 reply of /v1/simulate/cluster.
func clusterReply(t *testing.T, r reply) map[string]any {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("simulate/cluster: %d %s", r.status, r.body)
	}
	var v map[string]any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("reply: %v: %s", err, r.body)
	}
	return v
}

// The same body gives the same reply (a fixed seed); tick-only shipping is
// beside drift shipping, and over-admits more on a hot key.
func TestSimulateClusterDeterministic(t *testing.T) {
	h := clusterHarness(t)
	h.srv.sim.limit = time.Minute // a loaded machine and the race detector: the runs must finish
	body := `{"resource":{"kind":"tiers","tiers":"100,1,1,0"},"nodes":5,"sync_interval_ms":250,"delay_ms":1,"loss":0.01,"offered_per_s":200,"skew":"even","duration_ms":3000,"seed":42}`
	a := h.post("/v1/simulate/cluster", body)
	b := h.post("/v1/simulate/cluster", body)
	if string(a.body) != string(b.body) {
		t.Fatalf("same body, different replies:\n%s\n%s", a.body, b.body)
	}
	v := clusterReply(t, a)
	for _, f := range []string{"worst_window_ratio", "mean_window_ratio", "false_denials", "convergence_p50_ms", "convergence_p99_ms", "bytes_per_node_s", "tick_only"} {
		if _, ok := v[f]; !ok {
			t.Errorf("reply has no %q: %s", f, a.body)
		}
	}
	tick := v["tick_only"].(map[string]any)
	if !(tick["worst_window_ratio"].(float64) > v["worst_window_ratio"].(float64)) {
		t.Errorf("tick-only worst %v, drift %v: want tick-only higher", tick["worst_window_ratio"], v["worst_window_ratio"])
	}
	if !(v["bytes_per_node_s"].(float64) > tick["bytes_per_node_s"].(float64)) {
		t.Errorf("drift %v B/s, tick-only %v: want drift higher", v["bytes_per_node_s"], tick["bytes_per_node_s"])
	}
	if v["false_denials"].(float64) != 0 || v["requests"].(float64) != 3000 {
		t.Errorf("false denials %v, requests %v (want 0 and 5 × 200/s × 3 s)", v["false_denials"], v["requests"])
	}
	c := h.post("/v1/simulate/cluster", strings.Replace(body, `"seed":42`, `"seed":43`, 1))
	if string(c.body) == string(a.body) {
		t.Error("seeds 42 and 43 gave the same reply")
	}
}

// Only resource and nodes are required; MessagePack bodies are read too.
func TestSimulateClusterDefaultsAndMsgpack(t *testing.T) {
	h := clusterHarness(t)
	h.srv.sim.limit = time.Minute
	body := `{` + clusterGCRA + `,"nodes":3}`
	js := h.post("/v1/simulate/cluster", body)
	clusterReply(t, js)
	mp, err := mpwire.AppendFromJSON(nil, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	r := h.do("POST", "/v1/simulate/cluster", string(mp), "Content-Type: application/msgpack")
	if string(r.body) != string(js.body) {
		t.Errorf("MessagePack body: %d %s, JSON: %s", r.status, r.body, js.body)
	}
}

func TestSimulateClusterBadInput(t *testing.T) {
	h := clusterHarness(t)
	cases := []struct {
		body, code, msg string
		status          int
	}{
		{`{` + clusterGCRA + `}`, "bad_request", "nodes: required field is missing", 400},
		{`{"nodes":3}`, "bad_request", "resource: required field is missing", 400},
		{`{` + clusterGCRA + `,"nodes":0}`, "bad_request", "nodes: must be 1 to 200, got 0", 400},
		{`{` + clusterGCRA + `,"nodes":3,"loss":1}`, "bad_request", "loss: must be in [0, 1), got 1", 400},
		{`{` + clusterGCRA + `,"nodes":3,"drift":2}`, "bad_request", "drift: must be in [0, 1], got 2", 400},
		{`{` + clusterGCRA + `,"nodes":3,"skew":"left"}`, "bad_request", `skew: must be "even", "hot" or "zipf", got "left"`, 400},
		{`{` + clusterGCRA + `,"nodes":3,"speed":1}`, "bad_request", "speed: unknown field; expected one of resource, nodes", 400},
		{`{` + clusterGCRA + `,"nodes":"three"}`, "bad_request", "nodes: must be a JSON int, got string", 400},
		{`{` + clusterGCRA + `,"nodes":3,"duration_ms":10}`, "bad_request", "duration_ms: must be 100 to 60000, got 10", 400},
		{`{"resource":{"kind":"copies","domain_limit":2},"nodes":3}`, "bad_request", `resource.kind: must be gcra or tiers, got "copies"`, 400},
		{`{"resource":{"kind":"gcra","burst":0},"nodes":3}`, "bad_request", "resource", 400},
		{`{` + clusterGCRA + `,"nodes":200,"offered_per_s":100000,"duration_ms":60000}`, "too_large", "events (requests, ticks, merges and keys held) estimated, budget 1000000", 413},
		// Few requests but many keys on many nodes: every node comes to
		// hold every key the requests reach (about 16M), refused before it runs.
		{`{` + clusterGCRA + `,"nodes":200,"sync_interval_ms":60000,"offered_per_s":79,"keys":100000}`, "too_large", "about 158", 413},
		{`{` + clusterGCRA + `,"nodes":3`, "bad_request", "body", 400},
	}
	for _, c := range cases {
		r := h.post("/v1/simulate/cluster", c.body)
		code, msg := errorReply(t, r.body)
		if r.status != c.status || code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: %d %s %q; want %d %s containing %q", c.body, r.status, code, msg, c.status, c.code, c.msg)
		}
	}
}

// One simulation at a time, shared with /v1/simulate.
func TestSimulateClusterOneAtATime(t *testing.T) {
	h := clusterHarness(t)
	h.srv.sim.busy.Store(true)
	r := h.post("/v1/simulate/cluster", `{`+clusterGCRA+`,"nodes":3}`)
	if code, msg := errorReply(t, r.body); r.status != 429 || code != "too_many" || r.header.Get("Retry-After") != "1" || !strings.Contains(msg, "one at a time") {
		t.Errorf("concurrent: %d %s %q", r.status, code, msg)
	}
	h.srv.sim.busy.Store(false)
	// The time limit stops a run and names it.
	h.srv.sim.limit = 1
	r = h.post("/v1/simulate/cluster", `{`+clusterGCRA+`,"nodes":20,"duration_ms":5000}`)
	if code, msg := errorReply(t, r.body); r.status != 413 || code != "too_large" || !strings.Contains(msg, "time limit of 1ns") {
		t.Errorf("time limit: %d %s %q", r.status, code, msg)
	}
	h.srv.sim.limit = time.Minute
	clusterReply(t, h.post("/v1/simulate/cluster", `{`+clusterGCRA+`,"nodes":3}`))
}

// sizedCluster answers every run with figures of events events.
type sizedCluster struct{ events int64 }

func (f sizedCluster) SimulateCluster(context.Context, sim.ClusterScenario) (sim.ClusterFigures, error) {
	return sim.ClusterFigures{Events: f.events}, nil
}

// forcedGCs is the count of collections forced by the program.
func forcedGCs() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

// After runs of freeAfterEvents events together the heap goes back to the
// system (a forced collection); after small runs it does not.
func TestSimulateClusterFreesAfterLargeRuns(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		events int64
		forced bool
	}{{freeAfterEvents / 2, true}, {freeAfterEvents / 4, false}} {
		h.srv.clusterSim = sizedCluster{c.events} // two runs: drift and tick-only
		before := forcedGCs()
		if r := h.post("/v1/simulate/cluster", `{`+clusterGCRA+`,"nodes":3}`); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if got := forcedGCs() > before; got != c.forced {
			t.Errorf("runs of %d events each: forced collection %v, want %v", c.events, got, c.forced)
		}
	}
}
