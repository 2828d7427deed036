package api

import (
	"strings"
	"testing"

	"github.com/obol-dev/obol/config"
)

func TestReloadEndpoint(t *testing.T) {
	h := newHarness(t)
	// No config file: nothing to re-read, and the reply says so.
	r := h.post("/v1/config/reload", "")
	if code, msg := errorReply(t, r.body); r.status != 400 || code != "bad_request" || !strings.Contains(msg, "built-in") {
		t.Fatalf("reload without a file: %d %s", r.status, r.body)
	}

	file := testConfig
	h.srv.load = func() (*config.Config, string, error) {
		c, err := config.Parse([]byte(file))
		return c, "test.yaml", err
	}
	// Spend 3 of t/thirds' 3 tokens and hold 2 copies.
	h.ok("/v1/request", `{"resource":"t/thirds","domain":"d","copies":3}`)
	sid := str(t, h.ok("/v1/sessions", `{"ttl_ms":60000}`), "session")
	hold := str(t, h.ok("/v1/reserve", `{"resource":"t/copies","domain":"acme","copies":2,"session":"`+sid+`"}`), "hold")

	// A bad file is refused with every problem, and the config in force stays.
	file = "resources:\n  t/thirds: {kind: gcra, burst: 0, count: 3, period: 1s}\n  t/x: {kind: nope}\n"
	r = h.post("/v1/config/reload", "")
	if r.status != 400 {
		t.Fatalf("bad file: %d %s", r.status, r.body)
	}
	bad := decodeObject(t, r.body)["error"].(map[string]any)
	if probs, _ := bad["problems"].([]any); len(probs) != 2 {
		t.Fatalf("bad file: want 2 problems listed, got %v", bad)
	}
	if v := num(t, decodeObject(t, h.do("GET", "/v1/config", "").body), "version"); v != 1 {
		t.Fatalf("a refused reload changed the version to %d", v)
	}

	// A good file: t/thirds gets a bigger burst and keeps its spent TAT,
	// t/copies keeps its holds, t/shadow is removed.
	file = strings.Replace(testConfig, "t/thirds: {kind: gcra, burst: 3, count: 3, period: 1s}", "t/thirds: {kind: gcra, burst: 4, count: 3, period: 1s}", 1)
	file = strings.Replace(file, "  t/shadow: {kind: gcra, burst: 1, count: 1, period: 1s, shadow: true}\n", "", 1)
	res := h.ok("/v1/config/reload", "")
	if num(t, res, "version") != 2 || num(t, res, "unchanged") != 4 {
		t.Fatalf("reload reply: %v", res)
	}
	if ch := res["changed"].([]any); len(ch) != 1 || ch[0] != "t/thirds" {
		t.Fatalf("changed: %v", res["changed"])
	}
	if rm := res["removed"].([]any); len(rm) != 1 || rm[0] != "t/shadow" {
		t.Fatalf("removed: %v", res["removed"])
	}
	// The bucket kept its TAT: with burst 4 exactly one token fits now.
	if d := h.ok("/v1/request", `{"resource":"t/thirds","domain":"d","copies":2,"min_copies":1}`); num(t, d, "granted") != 1 {
		t.Fatalf("after reload: %v, want 1 granted (the counts survived)", d)
	}
	if rel := h.ok("/v1/release", `{"hold":"`+hold+`","copies":2}`); num(t, rel, "released") != 2 {
		t.Fatalf("hold after reload: %v", rel)
	}
	if r := h.post("/v1/request", `{"resource":"t/shadow","domain":"d"}`); r.status != 404 {
		t.Fatalf("removed resource: %d %s", r.status, r.body)
	}
}

func TestMetricsPage(t *testing.T) {
	h := newHarness(t)
	h.ok("/v1/request", `{"resource":"t/thirds","domain":"d","copies":3}`)
	h.ok("/v1/request", `{"resource":"t/thirds","domain":"d"}`) // rejected
	h.ok("/v1/request", `{"resource":"t/shadow","domain":"d"}`)
	h.ok("/v1/request", `{"resource":"t/shadow","domain":"d"}`) // shadow grant
	h.ok("/v1/request", `{"resource":"open/anything","domain":"d"}`)
	sid := str(t, h.ok("/v1/sessions", `{"ttl_ms":60000}`), "session")
	h.ok("/v1/reserve", `{"resource":"t/copies","domain":"acme","copies":2,"session":"`+sid+`"}`)
	r := h.do("GET", "/metrics", "")
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %s", r.status, r.header.Get("Content-Type"))
	}
	page := string(r.body)
	for _, want := range []string{
		`obol_decisions_total{outcome="granted",resource="t/thirds"} 1`,
		`obol_decisions_total{outcome="rejected",resource="t/thirds"} 1`,
		`obol_decisions_total{outcome="shadow",resource="t/shadow"} 1`,
		`obol_decisions_total{outcome="lenient",resource="unconfigured"} 1`,
		`obol_decision_duration_seconds_count{resource="t/thirds"} 2`,
		`obol_tracked_keys{resource="t/thirds"} 1`,
		`obol_holds{resource="t/copies"} 2`,
		`obol_sessions 1`,
		`go_goroutines `,
		`process_resident_memory_bytes `,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
