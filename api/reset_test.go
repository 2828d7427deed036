package api

import (
	"strings"
	"testing"
)

// POST /v1/reset forgets a key: the domain that used its burst gets it
// again; the reset is logged with who asked and counted by resource; the
// reply is {"reset": true}, in MessagePack when asked.
func TestResetKey(t *testing.T) {
	h := newHarness(t)
	if m := h.ok("/v1/request", `{"resource":"t/thirds","domain":"d","copies":3}`); num(t, m, "granted") != 3 {
		t.Fatalf("first request: %v, want 3 granted", m)
	}
	if m := h.ok("/v1/request", `{"resource":"t/thirds","domain":"d"}`); num(t, m, "granted") != 0 {
		t.Fatalf("past the burst: %v, want 0 granted", m)
	}
	m := h.ok("/v1/reset", `{"resource":"t/thirds","domain":"d"}`)
	if len(m) != 1 || m["reset"] != true {
		t.Fatalf("reset reply %v, want {\"reset\": true}", m)
	}
	if m := h.ok("/v1/request", `{"resource":"t/thirds","domain":"d","copies":3}`); num(t, m, "granted") != 3 {
		t.Fatalf("after the reset: %v, want the whole burst, 3", m)
	}
	line := h.logs.JSON("key reset")
	if line == nil || line["resource"] != "t/thirds" || line["domain"] != "d" || line["client"] == "" {
		t.Fatalf("log line %v, want resource, domain and client", line)
	}
	page := string(h.do("GET", "/metrics", "").body)
	if !strings.Contains(page, `obol_key_resets_total{resource="t/thirds"} 1`) {
		t.Fatalf("/metrics lacks the reset's count of t/thirds")
	}
	r := h.do("POST", "/v1/reset", `{"resource":"t/tiers","domain":"d"}`, "Accept: application/msgpack")
	if r.status != 200 || string(r.body) != "\x81\xa5reset\xc3" {
		t.Fatalf("msgpack reset: %d %q, want 200 and {reset: true}", r.status, r.body)
	}
}

// A reset names what it cannot take: a missing field, a copies or adaptive
// resource, an undefined one; an undefined one in a namespace that allows
// it holds nothing to reset.
func TestResetErrors(t *testing.T) {
	h := newHarness(t)
	h.expectErrors(t, "/v1/reset", []errorCase{
		{`{"resource":"t/tiers"}`, 400, "bad_request", []string{"domain"}},
		{`{"domain":"d"}`, 400, "bad_request", []string{"resource"}},
		{`{"resource":"t/tiers","domain":"d","copies":2}`, 400, "bad_request", []string{"copies"}},
		{`{"resource":"t/copies","domain":"d"}`, 409, "wrong_kind", []string{"t/copies", "reset"}},
		{`{"resource":"nope/x","domain":"d"}`, 404, "unknown_resource", []string{"nope/x"}},
		{`{"resource":"open/x","domain":"d"}`, 200, "", nil},
	})
}
