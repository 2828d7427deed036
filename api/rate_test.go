package api

import (
	"slices"
	"testing"
	"time"
)

var (
	// tiersBareFields is a tiers reply with no hard or global limit: "replies
	// omit hard_limit/global_limit when there is none".
	tiersBareFields = []string{"granted", "remaining", "retry_after_ms", "reset_after_ms", "tier", "tier_limit",
		"tier_hits", "burst", "domain_hits_last_second",
		"global_hits_last_second", "limited_by_hard", "limited_by_global", "shadow"}
	// tiersFields is the reply of the harness's t/tiers, which has a hard
	// limit and no global one.
	tiersFields = append(slices.Clone(tiersBareFields), "hard_limit")
	gcraFields  = []string{"granted", "remaining", "retry_after_ms", "reset_after_ms", "shadow"}
)

func sameFields(t *testing.T, m map[string]any, want []string) {
	t.Helper()
	got := keys(m)
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("reply fields %v, want %v", got, want)
	}
}

func TestRequestTiersReply(t *testing.T) {
	h := newHarness(t)
	m := h.ok("/v1/request", `{"resource":"t/tiers","domain":"u"}`)
	sameFields(t, m, tiersFields)
	want := map[string]int64{
		"granted": 1, "remaining": 54, "retry_after_ms": 0, "reset_after_ms": 1000,
		"tier": 1, "tier_limit": 5, "tier_hits": 1, "hard_limit": 100,
		"domain_hits_last_second": 1, "global_hits_last_second": 1,
	}
	for k, v := range want {
		if got := num(t, m, k); got != v {
			t.Errorf("%s = %d, want %d", k, got, v)
		}
	}
	for k, v := range map[string]bool{"burst": true, "limited_by_hard": false, "limited_by_global": false, "shadow": false} {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
}

// TestRequestGCRABoulder follows Boulder's worked example (docs/semantics.md):
// burst 20, count 20, period 1s.
func TestRequestGCRABoulder(t *testing.T) {
	h := newHarness(t)
	steps := []struct {
		at                                 time.Duration
		granted, remaining, retry, resetMs int64
	}{
		{at: 0, granted: 1, remaining: 19, retry: 0, resetMs: 50},
		{at: 5 * time.Millisecond, granted: 1, remaining: 18, retry: 0, resetMs: 95},
	}
	for i, s := range steps {
		h.clock.set(t0.Add(s.at))
		m := h.ok("/v1/request", `{"resource":"t/gcra","domain":"172.23.45.22"}`)
		sameFields(t, m, gcraFields)
		got := [4]int64{num(t, m, "granted"), num(t, m, "remaining"), num(t, m, "retry_after_ms"), num(t, m, "reset_after_ms")}
		if want := [4]int64{s.granted, s.remaining, s.retry, s.resetMs}; got != want {
			t.Errorf("step %d: granted, remaining, retry_after_ms, reset_after_ms = %v, want %v", i, got, want)
		}
	}
}

func TestRequestMinCopiesDefaultsToCopies(t *testing.T) {
	h := newHarness(t)
	if m := h.ok("/v1/request", `{"resource":"t/gcra","domain":"d","copies":18}`); num(t, m, "granted") != 18 {
		t.Fatalf("copies 18: %v", m)
	}
	// Two tokens left: all or nothing by default.
	m := h.ok("/v1/request", `{"resource":"t/gcra","domain":"d","copies":5}`)
	if num(t, m, "granted") != 0 || num(t, m, "remaining") != 2 {
		t.Errorf("copies 5 without min_copies: %v, want granted 0, remaining 2", m)
	}
	m = h.ok("/v1/request", `{"resource":"t/gcra","domain":"d","copies":5,"min_copies":1}`)
	if num(t, m, "granted") != 2 {
		t.Errorf("copies 5, min_copies 1: %v, want granted 2", m)
	}
}

func TestRequestRoundsDurationsUp(t *testing.T) {
	h := newHarness(t)
	// Emission interval 1s/3 = 333.33… ms: every duration is rounded up.
	m := h.ok("/v1/request", `{"resource":"t/thirds","domain":"d"}`)
	if got := num(t, m, "reset_after_ms"); got != 334 {
		t.Errorf("reset_after_ms = %d, want 334", got)
	}
	m = h.ok("/v1/request", `{"resource":"t/thirds","domain":"d","copies":2}`)
	// retry_after_ms is for min_copies (= copies = 2) tokens: 666.67 ms.
	if num(t, m, "remaining") != 0 || num(t, m, "retry_after_ms") != 667 || num(t, m, "reset_after_ms") != 1000 {
		t.Errorf("after the burst: %v, want remaining 0, retry_after_ms 667, reset_after_ms 1000", m)
	}
}

func TestRequestPeekChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.ok("/v1/request", `{"resource":"t/gcra","domain":"d","copies":3}`)
	for range 3 {
		m := h.ok("/v1/request", `{"resource":"t/gcra","domain":"d","copies":0}`)
		if num(t, m, "granted") != 0 || num(t, m, "remaining") != 17 {
			t.Fatalf("peek: %v, want granted 0, remaining 17", m)
		}
	}
}

func TestRequestUsesTheInjectedClock(t *testing.T) {
	h := newHarness(t)
	h.ok("/v1/request", `{"resource":"t/gcra","domain":"d","copies":20}`)
	if m := h.ok("/v1/request", `{"resource":"t/gcra","domain":"d"}`); num(t, m, "granted") != 0 || num(t, m, "retry_after_ms") != 50 {
		t.Fatalf("empty bucket: %v, want granted 0, retry_after_ms 50", m)
	}
	h.clock.set(t0.Add(50 * time.Millisecond))
	if m := h.ok("/v1/request", `{"resource":"t/gcra","domain":"d"}`); num(t, m, "granted") != 1 {
		t.Fatalf("50 ms later: %v, want granted 1", m)
	}
}

func TestRequestShadowAndNever(t *testing.T) {
	h := newHarness(t)
	h.ok("/v1/request", `{"resource":"t/shadow","domain":"d"}`)
	m := h.ok("/v1/request", `{"resource":"t/shadow","domain":"d"}`)
	if num(t, m, "granted") != 1 || m["shadow"] != true {
		t.Errorf("shadow rejection: %v, want granted 1, shadow true", m)
	}
	m = h.ok("/v1/request", `{"resource":"t/none","domain":"d"}`)
	if num(t, m, "granted") != 0 || num(t, m, "retry_after_ms") != -1 {
		t.Errorf("no tiers: %v, want granted 0, retry_after_ms -1", m)
	}
}

func TestRequestLenient(t *testing.T) {
	h := newHarness(t)
	m := h.ok("/v1/request", `{"resource":"open/anything","domain":"d"}`)
	if num(t, m, "granted") != 1 || m["lenient"] != true {
		t.Errorf("unconfigured resource in an open namespace: %v, want granted 1, lenient true", m)
	}
}

func TestRequestEscapedStrings(t *testing.T) {
	h := newHarness(t)
	// "\u0074/gcra" is t/gcra; the key "\u0063opies" is copies.
	m := h.ok("/v1/request", `{"resource":"\u0074/gcra","domain":"caf\u00e9 \ud83d\ude00","\u0063opies":4}`)
	if num(t, m, "granted") != 4 {
		t.Fatalf("escaped request: %v", m)
	}
	m = h.ok("/v1/request", `{"resource":"t/gcra","domain":"café 😀","copies":0}`)
	if num(t, m, "remaining") != 16 {
		t.Errorf("the escaped domain and the plain one differ: %v", m)
	}
}

func TestRefund(t *testing.T) {
	h := newHarness(t)
	h.ok("/v1/request", `{"resource":"t/gcra","domain":"d","copies":5}`)
	m := h.ok("/v1/refund", `{"resource":"t/gcra","domain":"d","copies":2}`)
	sameFields(t, m, []string{"remaining"})
	if num(t, m, "remaining") != 17 {
		t.Errorf("refund 2 after 5: %v, want remaining 17", m)
	}
	if m := h.ok("/v1/refund", `{"resource":"t/gcra","domain":"d"}`); num(t, m, "remaining") != 18 {
		t.Errorf("refund of the default 1: %v, want remaining 18", m)
	}
}

func TestCheck(t *testing.T) {
	h := newHarness(t)
	r := h.do("GET", "/v1/check?resource=t/tiers&domain=u", "")
	if r.status != 204 || len(r.body) != 0 {
		t.Fatalf("granted check: %d %s, want 204 and no body", r.status, r.body)
	}
	if got := r.header.Get("RateLimit-Policy"); got != `"t1";q=5;w=1, "t2";q=50;w=5, "hard";q=100;w=1` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	// One hit in tier 1: 4 left, and the hit leaves it in 1 s.
	if got := r.header.Get("RateLimit"); got != `"t1";r=4;t=1` {
		t.Errorf("RateLimit %q", got)
	}
	if got := r.header.Get("Retry-After"); got != "" {
		t.Errorf("Retry-After %q on a grant", got)
	}
}

func TestCheckHeadersAndQueryPrecedence(t *testing.T) {
	h := newHarness(t)
	r := h.do("GET", "/v1/check", "", "Obol-Resource: t/gcra", "Obol-Domain: d")
	if r.status != 204 || r.header.Get("RateLimit") != `"gcra";r=19;t=1` {
		t.Fatalf("check by headers: %d %v", r.status, r.header)
	}
	// The query parameter wins over its header.
	r = h.do("GET", "/v1/check?resource=t/tiers", "", "Obol-Resource: t/gcra", "Obol-Domain: d")
	if r.status != 204 || r.header.Get("RateLimit") != `"t1";r=4;t=1` {
		t.Fatalf("query over header: %d %v", r.status, r.header)
	}
}

func TestCheckRejected(t *testing.T) {
	h := newHarness(t)
	h.ok("/v1/request", `{"resource":"t/gcra","domain":"d","copies":20}`)
	r := h.do("GET", "/v1/check?resource=t/gcra&domain=d", "")
	if r.status != 429 {
		t.Fatalf("exhausted check: %d %s, want 429", r.status, r.body)
	}
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1 (50 ms rounded up)", got)
	}
	if got := r.header.Get("RateLimit-Policy"); got != `"gcra";q=20;w=1` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	if got := r.header.Get("RateLimit"); got != `"gcra";r=0;t=1` {
		t.Errorf("RateLimit %q", got)
	}
	m := decodeObject(t, r.body)
	if num(t, m, "granted") != 0 || num(t, m, "retry_after_ms") != 50 {
		t.Errorf("429 body %v", m)
	}
}

func TestCheckTierPolicies(t *testing.T) {
	h := newHarness(t)
	const policy = `"t1";q=5;w=1, "t2";q=50;w=5, "hard";q=100;w=1`
	// A peek on a fresh domain is in tier 0: the whole list, and tier 1
	// is the closest to its limit.
	r := h.do("GET", "/v1/check?resource=t/tiers&domain=fresh&copies=0", "")
	if r.status != 204 || r.header.Get("RateLimit-Policy") != policy || r.header.Get("RateLimit") != `"t1";r=5;t=1` {
		t.Errorf("peek in tier 0: %d %v", r.status, r.header)
	}
	// Seven hits: the domain has burst into tier 2 (50 per 5 s), whose
	// quota comes back only when its 15 s cooldown ends. Same list.
	for range 6 {
		h.ok("/v1/request", `{"resource":"t/tiers","domain":"b"}`)
	}
	r = h.do("GET", "/v1/check?resource=t/tiers&domain=b", "")
	if r.status != 204 || r.header.Get("RateLimit-Policy") != policy || r.header.Get("RateLimit") != `"t2";r=48;t=20` {
		t.Errorf("in tier 2: %d %v", r.status, r.header)
	}
	// No tier at all: rejected, never grantable: no Retry-After, no t.
	r = h.do("GET", "/v1/check?resource=t/none&domain=d", "")
	if r.status != 429 || r.header.Get("Retry-After") != "" || r.header.Get("RateLimit-Policy") != `"t0";q=0;w=1` ||
		r.header.Get("RateLimit") != `"t0";r=0` {
		t.Errorf("no tiers: %d %v", r.status, r.header)
	}
	// A lenient grant has no policy to show.
	r = h.do("GET", "/v1/check?resource=open/x&domain=d", "")
	if r.status != 204 || r.header.Get("RateLimit-Policy") != "" || r.header.Get("RateLimit") != "" {
		t.Errorf("lenient: %d %v", r.status, r.header)
	}
}

func TestCheckPeekOnEmptyBucket(t *testing.T) {
	h := newHarness(t)
	h.ok("/v1/request", `{"resource":"t/gcra","domain":"d","copies":20}`)
	if r := h.do("GET", "/v1/check?resource=t/gcra&domain=d&copies=0", ""); r.status != 429 {
		t.Errorf("peek on an empty bucket: %d, want 429", r.status)
	}
	h.clock.set(t0.Add(time.Second))
	if r := h.do("GET", "/v1/check?resource=t/gcra&domain=d&copies=0", ""); r.status != 204 {
		t.Errorf("peek on a refilled bucket: %d, want 204", r.status)
	}
}

func TestAppendSFString(t *testing.T) {
	for in, want := range map[string]string{
		"api/search": `"api/search"`,
		`a"b\c`:      `"a\"b\\c"`,
		"café\n":     `"caf%C3%A9%0A"`,
	} {
		if got := string(appendSFString(nil, in)); got != want {
			t.Errorf("appendSFString(%q) = %s, want %s", in, got, want)
		}
	}
}
