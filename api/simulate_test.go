package api

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// simReply decodes a /v1/simulate reply.
func simReply(t *testing.T, r reply) (cfg map[string]any, decisions []map[string]any) {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("simulate: %d %s", r.status, r.body)
	}
	var v struct {
		Config    map[string]any   `json:"config"`
		Decisions []map[string]any `json:"decisions"`
	}
	d := json.NewDecoder(strings.NewReader(string(r.body)))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("simulate reply: %v: %s", err, r.body)
	}
	return v.Config, v.Decisions
}

func TestSimulateBoulder(t *testing.T) {
	h := newHarness(t)
	body := `{"resource":{"kind":"gcra","burst":20,"count":20,"period":"1s"},"requests":[
		{"at_ms":0,"domain":"ip"},{"at_ms":5,"domain":"ip"},{"at_ms":5,"domain":"ip","copies":18},
		{"at_ms":49,"domain":"ip"},{"at_ms":50,"domain":"ip"},
		{"at_ms":50,"domain":"ip","op":"refund","copies":2},{"at_ms":50,"domain":"other","copies":0}]}`
	cfg, ds := simReply(t, h.post("/v1/simulate", body))
	if cfg["kind"] != "gcra" || cfg["period"] != "1s" {
		t.Errorf("normalized config %v", cfg)
	}
	want := []string{
		`{"granted":1,"remaining":19,"retry_after_ms":0,"reset_after_ms":50,"shadow":false}`,
		`{"granted":1,"remaining":18,"retry_after_ms":0,"reset_after_ms":95,"shadow":false}`,
		`{"granted":18,"remaining":0,"retry_after_ms":895,"reset_after_ms":995,"shadow":false}`,
		`{"granted":0,"remaining":0,"retry_after_ms":1,"reset_after_ms":951,"shadow":false}`,
		`{"granted":1,"remaining":0,"retry_after_ms":50,"reset_after_ms":1000,"shadow":false}`,
		`{"remaining":2}`,
		`{"granted":0,"remaining":20,"retry_after_ms":0,"reset_after_ms":0,"shadow":false}`,
	}
	if len(ds) != len(want) {
		t.Fatalf("%d decisions, want %d", len(ds), len(want))
	}
	for i := range want {
		var w map[string]any
		d := json.NewDecoder(strings.NewReader(want[i]))
		d.UseNumber()
		_ = d.Decode(&w)
		got, _ := json.Marshal(ds[i])
		exp, _ := json.Marshal(w)
		if string(got) != string(exp) {
			t.Errorf("decision %d: %s, want %s", i, got, exp)
		}
	}
}

func TestSimulateTiersAndItemErrors(t *testing.T) {
	h := newHarness(t)
	body := `{"resource":{"kind":"tiers","tiers":"2,1,1,0"},"requests":[
		{"at_ms":0,"domain":"d"},{"at_ms":0,"domain":"d","copies":2,"min_copies":1},{"at_ms":0,"domain":"d"},
		{"at_ms":1000,"domain":"d"}]}`
	_, ds := simReply(t, h.post("/v1/simulate", body))
	granted := []int64{1, 1, 0, 1}
	for i, g := range granted {
		if got := num(t, ds[i], "granted"); got != g {
			t.Errorf("decision %d: granted %d, want %d", i, got, g)
		}
		sameFields(t, ds[i], tiersBareFields)
	}

	// An item the engine refuses is an error item; the rest are decided.
	body = `{"resource":{"kind":"gcra","burst":2,"count":1,"period":"1s"},"requests":[
		{"at_ms":0,"domain":"d","copies":3},{"at_ms":0,"domain":"d"}]}`
	_, ds = simReply(t, h.post("/v1/simulate", body))
	e, _ := ds[0]["error"].(map[string]any)
	if e == nil || e["code"] != "cost_over_burst" {
		t.Errorf("item over the burst: %v, want a cost_over_burst error", ds[0])
	}
	if num(t, ds[1], "granted") != 1 {
		t.Errorf("item after the error: %v", ds[1])
	}
}

func TestSimulateIsFreshAndIsolated(t *testing.T) {
	h := newHarness(t)
	body := `{"resource":{"kind":"gcra","burst":1,"count":1,"period":"1s"},"requests":[{"at_ms":0,"domain":"d"}]}`
	first := h.post("/v1/simulate", body)
	second := h.post("/v1/simulate", body)
	if string(first.body) != string(second.body) {
		t.Errorf("the same simulation twice differs:\n%s\n%s", first.body, second.body)
	}
	_, ds := simReply(t, first)
	if num(t, ds[0], "granted") != 1 {
		t.Errorf("fresh engine: %v", ds[0])
	}
	// The live engine has no sim/resource.
	if r := h.post("/v1/request", `{"resource":"sim/resource","domain":"d"}`); r.status != 404 {
		t.Errorf("live engine after a simulation: %d %s", r.status, r.body)
	}
	_, ds = simReply(t, h.post("/v1/simulate", `{"requests":[],"resource":{"kind":"tiers","tiers":"1,1,1,0"}}`))
	if len(ds) != 0 {
		t.Errorf("no requests: %v", ds)
	}
}

func TestSimulateMaxRequests(t *testing.T) {
	h := newHarness(t)
	var b strings.Builder
	b.WriteString(`{"resource":{"kind":"gcra","burst":5,"count":1000,"period":"1s"},"requests":[`)
	for i := range maxSimRequests {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"at_ms":`)
		b.WriteString(strconv.Itoa(i))
		b.WriteString(`,"domain":"d`)
		b.WriteString(strconv.Itoa(i % 7))
		b.WriteString(`"}`)
	}
	b.WriteString(`]}`)
	if b.Len() <= maxBody {
		t.Fatalf("the body is only %d bytes", b.Len())
	}
	start := time.Now()
	r := h.post("/v1/simulate", b.String())
	t.Logf("post: %v", time.Since(start))
	if r.status != 200 {
		t.Fatalf("simulate: %d %.300s", r.status, r.body)
	}
	// Decoding 100000 replies with encoding/json is slow under -race:
	// count them instead.
	if n := strings.Count(string(r.body), `{"granted":1,`); n != maxSimRequests {
		t.Fatalf("%d granted decisions, want %d", n, maxSimRequests)
	}
}
