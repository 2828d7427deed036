package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

func TestState(t *testing.T) {
	h := newHarness(t)
	h.ok("/v1/request", `{"resource":"t/tiers","domain":"d"}`)
	r := h.do("GET", "/v1/state?resource=t/tiers&domain=d", "")
	if r.status != 200 {
		t.Fatalf("state: %d %s", r.status, r.body)
	}
	var st struct {
		Resource, Domain, Kind string
		Tracked                bool
		Tiers                  []struct {
			Tier        int    `json:"tier"`
			Limit       int    `json:"limit"`
			State       string `json:"state"`
			EnteredAtMs int64  `json:"entered_at_ms"`
			Hits        int    `json:"hits"`
		}
		Peek map[string]any
	}
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatalf("state reply: %v: %s", err, r.body)
	}
	if st.Resource != "t/tiers" || st.Domain != "d" || st.Kind != "tiers" || !st.Tracked || len(st.Tiers) != 2 {
		t.Fatalf("state %s", r.body)
	}
	if tr := st.Tiers[0]; tr.Tier != 1 || tr.Limit != 5 || tr.State != "active" || tr.EnteredAtMs != t0.UnixMilli() || tr.Hits != 1 {
		t.Errorf("tier 1: %+v", tr)
	}
	if tr := st.Tiers[1]; tr.Tier != 2 || tr.State != "inactive" || tr.EnteredAtMs != 0 || tr.Hits != 0 {
		t.Errorf("tier 2: %+v", tr)
	}
	if st.Peek["granted"] != float64(0) || st.Peek["tier"] != float64(1) {
		t.Errorf("peek %v", st.Peek)
	}
	// Asking changed nothing.
	if m := h.ok("/v1/request", `{"resource":"t/tiers","domain":"d","copies":0}`); num(t, m, "tier_hits") != 1 {
		t.Errorf("after /v1/state: %v", m)
	}

	h.ok("/v1/request", `{"resource":"t/gcra","domain":"d"}`)
	m := decodeObject(t, h.do("GET", "/v1/state?resource=t/gcra&domain=d", "").body)
	if num(t, m, "tat_ms") != t0.UnixMilli()+50 {
		t.Errorf("gcra state %v", m)
	}
	m = decodeObject(t, h.do("GET", "/v1/state?resource=t/copies&domain=d", "").body)
	if num(t, m, "holds") != 0 || m["kind"] != "copies" {
		t.Errorf("copies state %v", m)
	}
}

func TestConfigAndSetEngine(t *testing.T) {
	h := newHarness(t)
	r := h.do("GET", "/v1/config", "")
	m := decodeObject(t, r.body)
	if r.status != 200 || num(t, m, "version") != 1 {
		t.Fatalf("config: %d %s", r.status, r.body)
	}
	res := m["config"].(map[string]any)["resources"].(map[string]any)
	if g := res["t/gcra"].(map[string]any); g["period"] != "1s" || g["kind"] != "gcra" {
		t.Errorf("t/gcra as shown: %v", g)
	}

	cfg, err := config.Parse([]byte(`resources: {n/new: {kind: gcra, burst: 1, count: 1, period: 1s}}`))
	if err != nil {
		t.Fatal(err)
	}
	e := local.New(cfg)
	h.srv.SetEngine(e)
	if h.srv.Engine() != e {
		t.Fatalf("Engine() is not the engine set")
	}
	m = decodeObject(t, h.do("GET", "/v1/config", "").body)
	if num(t, m, "version") != 2 {
		t.Errorf("version after SetEngine: %v", m["version"])
	}
	if m := h.ok("/v1/request", `{"resource":"n/new","domain":"d"}`); num(t, m, "granted") != 1 {
		t.Errorf("request on the new config: %v", m)
	}
	if r := h.post("/v1/request", `{"resource":"t/gcra","domain":"d"}`); r.status != 404 {
		t.Errorf("request on the old config: %d %s", r.status, r.body)
	}
}

func TestPeersHealthReady(t *testing.T) {
	h := newHarness(t)
	r := h.do("GET", "/v1/peers", "")
	var p struct {
		Peers []map[string]any `json:"peers"`
	}
	if err := json.Unmarshal(r.body, &p); err != nil || len(p.Peers) != 1 {
		t.Fatalf("peers: %d %s", r.status, r.body)
	}
	if n := p.Peers[0]; n["name"] != "node-a" || n["state"] != "alive" || n["last_sync_age_ms"] != float64(0) {
		t.Errorf("peer %v", n)
	}
	if r := h.do("GET", "/healthz", ""); r.status != 200 {
		t.Errorf("healthz %d", r.status)
	}
	if r := h.do("GET", "/readyz", ""); r.status != 200 {
		t.Errorf("readyz when ready: %d %s", r.status, r.body)
	}
	h.srv.SetReady(false)
	r = h.do("GET", "/readyz", "")
	if code, _ := errorReply(t, r.body); r.status != 503 || code != "not_ready" {
		t.Errorf("readyz when not ready: %d %s", r.status, r.body)
	}
	if r := h.do("GET", "/healthz", ""); r.status != 200 {
		t.Errorf("healthz when not ready: %d", r.status)
	}
}

// TestStateAdaptive steps an adaptive resource over fixed instants and
// checks what /v1/state shows of its window: the window, the calls
// outstanding, the bounds, the timeout and the tickets expired.
func TestStateAdaptive(t *testing.T) {
	h := newObsHarness(t)
	state := func(q string) string {
		t.Helper()
		r := h.do("GET", "/v1/state?"+q, "")
		if r.status != 200 {
			t.Fatalf("state?%s: %d %s", q, r.status, r.body)
		}
		return string(r.body)
	}
	const fresh = `{"resource":"o/login","domain":"","kind":"adaptive","tracked":true,"window":2,"outstanding":0,"min_window":1,"max_window":2,"timeout_ms":10000,"expired":0}`
	if got := state("resource=o/login"); got != fresh {
		t.Errorf("fresh:\n%s\nwant\n%s", got, fresh)
	}
	h.ok("/v1/admit", `{"resource":"o/login"}`)
	h.clock.set(t0.Add(4 * time.Second))
	h.ok("/v1/admit", `{"resource":"o/login"}`)
	// A domain may be given; it plays no part.
	if got, want := state("resource=o/login&domain=x"), `{"resource":"o/login","domain":"x","kind":"adaptive","tracked":true,"window":2,"outstanding":2,"min_window":1,"max_window":2,"timeout_ms":10000,"expired":0}`; got != want {
		t.Errorf("two outstanding:\n%s\nwant\n%s", got, want)
	}
	// At 10 s the first ticket has been outstanding for the timeout: asking
	// expires it first (a backoff at position 1: the window falls to 1).
	h.clock.set(t0.Add(10 * time.Second))
	m := decodeObject(t, []byte(state("resource=o/login")))
	if num(t, m, "window") != 1 || num(t, m, "outstanding") != 1 || num(t, m, "expired") != 1 {
		t.Errorf("after the timeout: %v", m)
	}
	// Other kinds still need the domain.
	r := h.do("GET", "/v1/state?resource=o/gcra", "")
	if code, msg := errorReply(t, r.body); r.status != 400 || code != codeBadRequest || msg != "domain: required field is missing" {
		t.Errorf("gcra without a domain: %d %s %s", r.status, code, msg)
	}
	r = h.do("GET", "/v1/state?resource=nope/x", "")
	if code, _ := errorReply(t, r.body); r.status != 400 || code != codeBadRequest {
		t.Errorf("an unknown resource without a domain: %d %s", r.status, r.body)
	}
	// A gcra state has no window fields.
	if m := decodeObject(t, []byte(state("resource=o/gcra&domain=a"))); m["window"] != nil || m["outstanding"] != nil {
		t.Errorf("gcra state: %v", m)
	}
}
