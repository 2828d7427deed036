package api

import (
	"encoding/json"
	"testing"
	"time"
)

func TestSessions(t *testing.T) {
	h := newHarness(t)
	m := h.ok("/v1/sessions", ``)
	if str(t, m, "session") == "" || num(t, m, "ttl_ms") != 30000 {
		t.Errorf("session with the default ttl: %v", m)
	}
	m = h.ok("/v1/sessions", `{"ttl_ms":5000}`)
	id := str(t, m, "session")
	if num(t, m, "ttl_ms") != 5000 {
		t.Errorf("session of 5 s: %v", m)
	}
	h.clock.set(t0.Add(4 * time.Second))
	m = h.ok("/v1/sessions/"+id+"/keepalive", ``)
	if str(t, m, "session") != id || num(t, m, "ttl_ms") != 5000 {
		t.Errorf("keepalive: %v", m)
	}
	// Renewed at 4 s: alive at 8 s, gone at 9 s.
	h.clock.set(t0.Add(8 * time.Second))
	h.ok("/v1/sessions/"+id+"/keepalive", `{}`)
	h.clock.set(t0.Add(13*time.Second + time.Millisecond))
	r := h.post("/v1/sessions/"+id+"/keepalive", ``)
	if code, _ := errorReply(t, r.body); r.status != 404 || code != "unknown_session" {
		t.Errorf("keepalive of an expired session: %d %s", r.status, r.body)
	}
}

func TestEndSessionReleasesItsHolds(t *testing.T) {
	h := newHarness(t)
	id := str(t, h.ok("/v1/sessions", `{}`), "session")
	h.ok("/v1/reserve", `{"resource":"t/copies","domain":"d","copies":3,"session":"`+id+`"}`)
	r := h.do("DELETE", "/v1/sessions/"+id, "")
	if r.status != 200 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if m := decodeObject(t, r.body); num(t, m, "released") != 3 {
		t.Errorf("DELETE: %v, want released 3", m)
	}
	if r := h.do("DELETE", "/v1/sessions/"+id, ""); r.status != 404 {
		t.Errorf("second DELETE: %d %s, want 404", r.status, r.body)
	}
}

func TestReserveReleaseTransferSeize(t *testing.T) {
	h := newHarness(t)
	s1 := str(t, h.ok("/v1/sessions", `{}`), "session")
	m := h.ok("/v1/reserve", `{"resource":"t/copies","domain":"acme","copies":3,"min_copies":1,"session":"`+s1+`"}`)
	hold := str(t, m, "hold")
	for k, v := range map[string]int64{"granted": 3, "domain_limit": 5, "global_limit": 100, "domain_holds": 3, "global_holds": 3} {
		if num(t, m, k) != v {
			t.Errorf("reserve: %s = %d, want %d", k, num(t, m, k), v)
		}
	}
	groups, _ := json.Marshal(m["groups"])
	if string(groups) != `[{"holds":3,"limit":20,"name":"partners"}]` {
		t.Errorf("reserve groups %s", groups)
	}

	// Over the domain limit, all or nothing: rejected, no hold.
	m = h.ok("/v1/reserve", `{"resource":"t/copies","domain":"acme","copies":3,"session":"`+s1+`"}`)
	if num(t, m, "granted") != 0 || m["hold"] != nil {
		t.Errorf("rejected reserve: %v, want granted 0 and no hold", m)
	}
	// A domain in no group.
	m = h.ok("/v1/reserve", `{"resource":"t/copies","domain":"solo","session":"`+s1+`"}`)
	if g, ok := m["groups"].([]any); !ok || len(g) != 0 || num(t, m, "granted") != 1 {
		t.Errorf("reserve for a domain in no group: %v", m)
	}

	m = h.ok("/v1/release", `{"hold":"`+hold+`"}`)
	if num(t, m, "released") != 1 || num(t, m, "held") != 2 {
		t.Errorf("release: %v, want released 1, held 2", m)
	}
	transfer := str(t, h.ok("/v1/transfer", `{"hold":"`+hold+`","copies":2,"ttl_ms":1000}`), "transfer")
	s2 := str(t, h.ok("/v1/sessions", `{}`), "session")
	m = h.ok("/v1/seize", `{"transfer":"`+transfer+`","session":"`+s2+`"}`)
	if str(t, m, "hold") == "" || str(t, m, "resource") != "t/copies" || str(t, m, "domain") != "acme" || num(t, m, "copies") != 2 {
		t.Errorf("seize: %v", m)
	}
	if g, _ := json.Marshal(m["groups"]); string(g) != `["partners"]` {
		t.Errorf("seize groups %s", g)
	}
	r := h.post("/v1/seize", `{"transfer":"`+transfer+`","session":"`+s2+`"}`)
	if code, _ := errorReply(t, r.body); r.status != 404 || code != "unknown_transfer" {
		t.Errorf("second seize: %d %s", r.status, r.body)
	}
}
