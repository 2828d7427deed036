package api

import (
	"cmp"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

const gcra2 = `{"kind":"gcra","burst":2,"count":2,"period":"1s"}`

// A request that sets its limit is decided under it, in JSON and in
// MessagePack alike; each definition of a name counts apart; the config
// wins over a valid limit; a batch's items, a refund and a reset take one
// too.
func TestRequestLimits(t *testing.T) {
	h := newHarness(t)
	body := func(res, dom, lim string, more string) string {
		return `{"resource":"` + res + `","domain":"` + dom + `","limit":` + lim + more + `}`
	}
	for i, want := range []int64{1, 1, 0} {
		if m := h.ok("/v1/request", body("rq/a", "u", gcra2, "")); num(t, m, "granted") != want {
			t.Fatalf("request %d under gcra 2: %v, want %d granted", i, m, want)
		}
	}
	if m := h.ok("/v1/request", body("rq/a", "u", `{"kind":"gcra","burst":3,"count":3,"period":"1s"}`, "")); num(t, m, "granted") != 1 {
		t.Fatalf("another limit of the name: %v, want granted (counted apart)", m)
	}
	mp := mpBody(t, map[string]any{"resource": "rq/a", "domain": "u", "limit": map[string]any{"kind": "gcra", "period": "1s", "count": 2, "burst": 2}})
	r := h.do("POST", "/v1/request", mp, hdrSendMsgpack)
	if m := decodeObject(t, r.body); r.status != 200 || num(t, m, "granted") != 0 {
		t.Fatalf("the same limit in MessagePack: %d %s, want its key's count (0 granted)", r.status, r.body)
	}
	for i, want := range []int64{3, 0} {
		if m := h.ok("/v1/request", body("t/thirds", "u", `{"kind":"gcra","burst":9,"count":9,"period":"1s"}`, `,"copies":3,"min_copies":0`)); num(t, m, "granted") != want {
			t.Fatalf("request %d of a configured resource with a limit of 9: %v, want %d granted (its config's burst of 3)", i, m, want)
		}
	}
	m := h.ok("/v1/batch", `{"requests":[`+body("rq/b", "v", gcra2, `,"copies":2`)+`,`+body("rq/b", "v", gcra2, "")+`,`+body("rq/b", "v", `{"kind":"gcra"}`, "")+`]}`)
	rs := m["responses"].([]any)
	if len(rs) != 3 || num(t, rs[0].(map[string]any), "granted") != 2 || num(t, rs[1].(map[string]any), "granted") != 0 ||
		!strings.Contains(rs[2].(map[string]any)["error"].(map[string]any)["code"].(string), "bad_limit") {
		t.Fatalf("batch: %v, want 2 granted, 0 granted, bad_limit", rs)
	}
	if m := h.ok("/v1/refund", body("rq/b", "v", gcra2, `,"copies":1`)); num(t, m, "remaining") != 1 {
		t.Fatalf("refund: %v, want 1 remaining", m)
	}
	if m := h.ok("/v1/reset", body("rq/b", "v", gcra2, "")); m["reset"] != true {
		t.Fatalf("reset: %v", m)
	}
	if m := h.ok("/v1/request", body("rq/b", "v", gcra2, `,"copies":2`)); num(t, m, "granted") != 2 {
		t.Fatalf("after the reset: %v, want 2 granted", m)
	}
	if line := h.logs.JSON("key reset"); line == nil || line["resource"] != "rq/b {gcra:2/2/1s}" {
		t.Fatalf("reset log %v, want the resource shown with its limit", line)
	}
	m = h.ok("/v1/request", body("rq/c", "w", gcra2, `,"settle":true,"copies":2`))
	tk := str(t, m, "ticket")
	if m := h.ok("/v1/settle", `{"ticket":"`+tk+`","copies":1}`); num(t, m, "remaining") != 1 {
		t.Fatalf("settle: %v, want 1 remaining", m)
	}
	page := string(h.do("GET", "/metrics", "").body)
	for _, want := range []string{`obol_decisions_total{outcome="granted",resource="requested"}`, `obol_request_limits{namespace="rq"} 4`, `obol_request_limit_keys{namespace="rq"} 4`, `obol_key_resets_total{resource="requested"} 1`} {
		if !strings.Contains(page, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// A limit that cannot be taken is refused with the field it is about:
// malformed, invalid, of a kind a request cannot set, in a namespace that
// does not allow it, past a namespace's caps; a resource name with a NUL
// byte (the separator of a limit's name) is refused outright.
func TestRequestLimitErrors(t *testing.T) {
	h := newHarness(t)
	h.expectErrors(t, "/v1/request", []errorCase{
		{`{"resource":"rq/a","domain":"u","limit":{"kind":"gcra","burst":0,"count":2,"period":"1s"}}`, 400, "bad_limit", []string{"limit.burst", "≥ 1"}},
		{`{"resource":"rq/a","domain":"u","limit":{"kind":"copies","domain_limit":2}}`, 400, "bad_limit", []string{"limit.kind", "gcra", "tiers"}},
		{`{"resource":"rq/a","domain":"u","limit":{"kind":"gcra","burst":2,"count":2,"period":"1s","drift":0}}`, 400, "bad_limit", []string{"limit.drift"}},
		{`{"resource":"rq/a","domain":"u","limit":{"kind":"tiers","tiers":"5,1"}}`, 400, "bad_limit", []string{"limit.tiers"}},
		{`{"resource":"rq/a","domain":"u","limit":"gcra"}`, 400, "bad_limit", []string{"limit", "object"}},
		{`{"resource":"rq/a","domain":"u","limit":{}}`, 400, "bad_limit", []string{"limit", "kind"}},
		{`{"resource":"rq/a","domain":"u","limit":{"kind":"gcra","burst":2,"count":2,"period":"1s"},"limit":{}}`, 400, "bad_request", []string{"limit", "twice"}},
		{`{"resource":"t/thirds","domain":"u","limit":{"kind":"gcra","burst":0,"count":1,"period":"1s"}}`, 200, "", nil}, // the config wins: the limit is not read
		{`{"resource":"rq/a","domain":"u\u0000v","limit":` + gcra2 + `}`, 400, "bad_request", []string{"domain", "NUL"}},
		{"{\"resource\":\"rq/a\",\"domain\":\"u\",\"limit\":{\"kind\":\"gcra\",\"period\":\"1\xffs\"}}", 400, "bad_limit", []string{"limit", "UTF-8"}},
		{`{"resource":"rq/a","domain":"u","limit":{"kind":"gcra","burst":1000,"count":1,"period":"1h"}}`, 400, "bad_limit", []string{"max_request_window", "1000h0m0s"}},
		{`{"resource":"open/a","domain":"u","limit":` + gcra2 + `}`, 400, "bad_limit", []string{`namespace "open"`, "request_limits"}},
		{`{"resource":"t/x","domain":"u","limit":` + gcra2 + `}`, 400, "bad_limit", []string{`namespace "t"`}},
		{`{"resource":"rq/a\u0000gcra:2/2/1s","domain":"u"}`, 400, "bad_request", []string{"resource", "NUL"}},
		{`{"resource":"rq/a","domain":"u","limit":{"kind":"gcra","burst":2,"count":2,"period":"` + strings.Repeat("1", 5000) + `s"}}`, 400, "bad_limit", []string{"limit", "over the 4096"}},
	})
	for i := range 4 {
		h.ok("/v1/request", `{"resource":"rq/d`+string(rune('0'+i))+`","domain":"u","limit":`+gcra2+`}`)
	}
	r := h.post("/v1/request", `{"resource":"rq/d9","domain":"u","limit":`+gcra2+`}`)
	if code, msg := errorReply(t, r.body); r.status != 429 || code != "too_many" || !strings.Contains(msg, "max_request_limits") {
		t.Fatalf("a fifth definition: %d %s %s, want 429 too_many naming max_request_limits", r.status, code, msg)
	}
	for i := range 2 {
		h.ok("/v1/request", `{"resource":"rq/d0","domain":"k`+string(rune('0'+i))+`","limit":`+gcra2+`}`)
	}
	r = h.post("/v1/request", `{"resource":"rq/d0","domain":"k9","limit":`+gcra2+`}`)
	if code, msg := errorReply(t, r.body); r.status != 429 || code != "too_many" || !strings.Contains(msg, "max_request_keys") {
		t.Fatalf("a seventh key: %d %s %s, want 429 too_many naming max_request_keys", r.status, code, msg)
	}
}

// BenchmarkRequestLimit is BenchmarkRequestHandler's decision under a
// limit set by the request, against the same gcra limit in the config
// (configured): repeated, the limit's JSON is parsed once (the cache), and
// a fresh limit on every request (fresh) costs its parse. Compare with
//
//	go test ./api -run '^$' -bench BenchmarkRequestLimit
func BenchmarkRequestLimit(b *testing.B) {
	for _, bc := range []struct {
		name   string
		body   func(i int) string
		fresh  bool
		status int // 200 unless set
	}{
		{name: "configured", body: func(int) string {
			return `{"resource":"t/gcra","domain":"user-42","limit":{"kind":"gcra","burst":20,"count":20,"period":"1s"}}`
		}},
		{name: "repeated", body: func(int) string {
			return `{"resource":"rq/gcra","domain":"user-42","limit":{"kind":"gcra","burst":20,"count":20,"period":"1s"}}`
		}},
		{name: "fresh", fresh: true, body: func(i int) string {
			return `{"resource":"rq/gcra","domain":"user-42","limit":{"kind":"gcra","burst":20,"count":20,"period":"` + strconv.Itoa(1000+i%3) + `ms"}}`
		}},
		// a namespace at its max_request_limits: every new limit is 429
		{name: "capped", fresh: true, status: 429, body: func(i int) string {
			return `{"resource":"rq/gcra","domain":"user-42","limit":{"kind":"gcra","burst":20,"count":20,"period":"` + strconv.Itoa(2000+i) + `ms"}}`
		}},
		{name: "unknown", status: 404, body: func(int) string {
			return `{"resource":"t/nope","domain":"user-42"}`
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := New(testEngine(b), Options{Now: func() time.Time { return t0 }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.SetRequestURI("/v1/request")
			ctx.Request.Header.SetContentType(contentTypeJSON)
			ctx.Request.SetBody([]byte(bc.body(0)))
			want := cmp.Or(bc.status, 200)
			if want == 429 { // fill the namespace's definitions
				for i := range 4 {
					ctx.Request.SetBody([]byte(`{"resource":"rq/gcra","domain":"u","limit":{"kind":"gcra","burst":1,"count":1,"period":"` + strconv.Itoa(i+1) + `s"}}`))
					s.Handler(&ctx)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if bc.fresh {
					s.limits.mu.Lock()
					s.limits.m = nil // every request's limit is new to the cache
					s.limits.mu.Unlock()
					i++
					ctx.Request.SetBody([]byte(bc.body(i)))
				}
				ctx.Response.Reset()
				s.Handler(&ctx)
				if ctx.Response.StatusCode() != want {
					b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
				}
			}
		})
	}
}

// The cache of limits' texts stays within maxLimitCache, and an entry
// read again is still right after others pushed some out; a limit longer
// than maxCachedLimit or refused is never kept.
func TestLimitCacheBounded(t *testing.T) {
	var lc limitCache
	for i := range maxLimitCache + 100 {
		raw := []byte(`{"kind":"gcra","burst":1,"count":1,"period":"` + strconv.Itoa(i+1) + `ms"}`)
		e, cached, err := lc.of(raw)
		if err != nil || cached {
			t.Fatalf("%s: cached %v, %v", raw, cached, err)
		}
		lc.keep(raw, e)
	}
	if n := len(lc.m); n > maxLimitCache || n < maxLimitCache*7/8 {
		t.Fatalf("%d entries, want at most %d and most of them kept", n, maxLimitCache)
	}
	raw := []byte(`{"kind":"gcra","burst":1,"count":1,"period":"1s"}`)
	e, _, err := lc.of(raw)
	if err != nil || e.key != "gcra:1/1/1s" || e.life != time.Second {
		t.Fatalf("after churn: %+v, %v", e, err)
	}
	lc.keep(raw, e)
	if e, cached, err := lc.of(raw); err != nil || !cached || e.key != "gcra:1/1/1s" {
		t.Fatalf("kept, read again: %+v, cached %v, %v", e, cached, err)
	}
	padded := []byte(`{"kind":"gcra","burst":1,"count":1,"period":"1s"` + strings.Repeat(" ", maxCachedLimit) + `}`)
	n := len(lc.m)
	e, _, err = lc.of(padded)
	if lc.keep(padded, e); err != nil || e.key != "gcra:1/1/1s" || len(lc.m) != n {
		t.Fatalf("a limit of %d bytes: %+v, %v, cache %d → %d entries; want read and not kept", len(padded), e, err, n, len(lc.m))
	}
	if _, _, err := lc.of([]byte(`{"kind":"gcra"}`)); err == nil {
		t.Fatal("a bad limit read as good")
	}
}

// The server keeps a limit's text only once the engine holds its
// definition: a limit refused because its namespace is at its cap, or a
// bad one, leaves the cache as it was, and a definition's text is kept from
// its second use on.
func TestLimitCacheKeepsDefinedOnly(t *testing.T) {
	h := newHarness(t)
	cached := func() int {
		h.srv.limits.mu.RLock()
		defer h.srv.limits.mu.RUnlock()
		return len(h.srv.limits.m)
	}
	ask := func(limit string, want int) {
		t.Helper()
		r := h.post("/v1/request", `{"resource":"rq/x","domain":"u","limit":`+limit+`}`)
		if r.status != want {
			t.Fatalf("%s: status %d, want %d: %s", limit, r.status, want, r.body)
		}
	}
	first := `{"kind":"gcra","burst":5,"count":5,"period":"1s"}`
	ask(first, 200)
	if n := cached(); n != 0 {
		t.Fatalf("after a definition's first use: %d cached, want 0", n)
	}
	ask(first, 200)
	if n := cached(); n != 1 {
		t.Fatalf("after its second use: %d cached, want 1", n)
	}
	for i := range 3 { // the namespace's cap is 4 definitions
		ask(`{"kind":"gcra","burst":5,"count":5,"period":"`+strconv.Itoa(i+2)+`s"}`, 200)
	}
	for i := range 50 {
		ask(`{"kind":"gcra","burst":5,"count":5,"period":"`+strconv.Itoa(i+10)+`s"}`, 429)
		ask(`{"kind":"gcra","burst":0,"count":5,"period":"`+strconv.Itoa(i+10)+`s"}`, 400)
	}
	if n := cached(); n != 1 {
		t.Fatalf("after refused limits: %d cached, want 1", n)
	}
}
