package api

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// batchJSON builds a JSON /v1/batch body of the items (JSON objects).
func batchJSON(items ...string) string {
	return `{"requests":[` + strings.Join(items, ",") + `]}`
}

// batchReplies posts a batch (JSON, or MessagePack both ways) and returns
// its responses, normalized.
func (h *harness) batch(asMsgpack bool, jsonBody string, mpItems []any) []any {
	h.t.Helper()
	var r reply
	if asMsgpack {
		r = h.do("POST", "/v1/batch", mpBody(h.t, map[string]any{"requests": mpItems}), hdrSendMsgpack, hdrAcceptMsgpack)
	} else {
		r = h.post("/v1/batch", jsonBody)
	}
	if r.status != 200 {
		h.t.Fatalf("batch (MessagePack %v): %d %q", asMsgpack, r.status, r.body)
	}
	var v any
	if asMsgpack {
		v = mpDecode(h.t, r.body)
	} else {
		v = jsonDecode(h.t, r.body)
	}
	m, _ := v.(map[string]any)
	if len(m) != 1 {
		h.t.Fatalf("batch reply %v, want {responses}", v)
	}
	rs, ok := m["responses"].([]any)
	if !ok {
		h.t.Fatalf("batch reply %v: responses is not a list", v)
	}
	return rs
}

// itemCode returns the error code of a batch response, "" for a decision.
func itemCode(t *testing.T, v any) (code, msg string) {
	t.Helper()
	m, _ := v.(map[string]any)
	e, ok := m["error"].(map[string]any)
	if !ok {
		return "", ""
	}
	if len(m) != 1 || len(e) != 2 {
		t.Errorf("error item %v, want only error.code and error.message", m)
	}
	code, _ = e["code"].(string)
	msg, _ = e["message"].(string)
	return code, msg
}

// both runs f for a JSON batch and a MessagePack one, each on a fresh server.
func both(t *testing.T, f func(t *testing.T, h *harness, asMsgpack bool)) {
	for _, asMsgpack := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "msgpack"}[asMsgpack], func(t *testing.T) {
			f(t, newHarness(t), asMsgpack)
		})
	}
}

func TestBatchOrderAndItemErrors(t *testing.T) {
	both(t, func(t *testing.T, h *harness, asMsgpack bool) {
		items := []string{
			`{"resource":"t/gcra","domain":"d","copies":3}`,
			`{"resource":"nope/x","domain":"d"}`,
			`{"resource":"t/gcra","domain":"d","copies":-1}`,
			`{"resource":"t/copies","domain":"d"}`,
			`{"resource":"t/gcra","domain":"d","copies":21}`,
			`{"resource":"t/gcra"}`,
			`{"resource":"t/gcra","domain":"d","colour":"red"}`,
			`7`,
			`{"resource":"t/tiers","domain":"d"}`,
			`{"resource":"t/gcra","domain":"d","copies":3,"min_copies":5}`,
			`{"resource":"t/gcra","domain":"d","copies":1,"copies":1}`,
			`{"resource":"t/gcra","domain":"d"}`,
		}
		mp := []any{
			map[string]any{"resource": "t/gcra", "domain": "d", "copies": 3},
			map[string]any{"resource": "nope/x", "domain": "d"},
			map[string]any{"resource": "t/gcra", "domain": "d", "copies": -1},
			map[string]any{"resource": "t/copies", "domain": "d"},
			map[string]any{"resource": "t/gcra", "domain": "d", "copies": 21},
			map[string]any{"resource": "t/gcra"},
			map[string]any{"resource": "t/gcra", "domain": "d", "colour": "red"},
			7,
			map[string]any{"resource": "t/tiers", "domain": "d"},
			map[string]any{"resource": "t/gcra", "domain": "d", "copies": 3, "min_copies": 5},
			map[string]any{"resource": "t/gcra", "domain": "d", "copies": []any{1, []any{2}}},
			map[string]any{"resource": "t/gcra", "domain": "d"},
		}
		rs := h.batch(asMsgpack, batchJSON(items...), mp)
		want := []struct{ code, names string }{
			{"", ""},
			{"unknown_resource", "nope/x"},
			{"bad_request", "requests[2].copies"},
			{"wrong_kind", "t/copies"},
			{"cost_over_burst", "21"},
			{"bad_request", "requests[5].domain"},
			{"bad_request", "requests[6].colour"},
			{"bad_request", "requests[7]"},
			{"", ""},
			{"bad_request", "requests[9].min_copies"},
			{"bad_request", "requests[10].copies"},
			{"", ""},
		}
		if len(rs) != len(want) {
			t.Fatalf("%d responses, want %d: %v", len(rs), len(want), rs)
		}
		for i, w := range want {
			code, msg := itemCode(t, rs[i])
			if code != w.code || !strings.Contains(msg, w.names) {
				t.Errorf("item %d: %q %q, want %q naming %q", i, code, msg, w.code, w.names)
			}
		}
		// The grants happened in order: 3 then 1 of gcra's 20.
		if m := rs[0].(map[string]any); m["granted"] != int64(3) || m["remaining"] != int64(17) {
			t.Errorf("item 0: %v", m)
		}
		if m := rs[11].(map[string]any); m["granted"] != int64(1) || m["remaining"] != int64(16) {
			t.Errorf("item 11: %v", m)
		}
		if m := rs[8].(map[string]any); m["tier"] != int64(1) || len(m) != len(tiersFields) {
			t.Errorf("item 8: %v", m)
		}
	})
}

// TestBatchIsLikeSendingAlone decides the same sequence in batches on one
// server and one /v1/request at a time on another: the replies must match.
func TestBatchIsLikeSendingAlone(t *testing.T) {
	both(t, func(t *testing.T, hb *harness, asMsgpack bool) {
		ha := newHarness(t)
		var items []string
		var mp []any
		for i := range 40 {
			res := []string{"t/tiers", "t/gcra", "t/thirds", "t/shadow", "t/none", "open/x"}[i%6]
			copies := i % 4
			items = append(items, fmt.Sprintf(`{"resource":%q,"domain":"d%d","copies":%d}`, res, i%2, copies))
			mp = append(mp, map[string]any{"resource": res, "domain": fmt.Sprint("d", i%2), "copies": copies})
		}
		for round := range 3 {
			at := t0.Add(time.Duration(round) * 700 * time.Millisecond)
			ha.clock.set(at)
			hb.clock.set(at)
			rs := hb.batch(asMsgpack, batchJSON(items...), mp)
			for i, it := range items {
				alone := jsonDecode(t, ha.post("/v1/request", it).body)
				if !reflect.DeepEqual(rs[i], alone) {
					t.Fatalf("round %d item %d %s:\nbatch %v\nalone %v", round, i, it, rs[i], alone)
				}
			}
		}
	})
}

func TestBatchMixedKindsShadowAndPeeks(t *testing.T) {
	both(t, func(t *testing.T, h *harness, asMsgpack bool) {
		items := []string{
			`{"resource":"t/shadow","domain":"s"}`,
			`{"resource":"t/shadow","domain":"s"}`,
			`{"resource":"t/gcra","domain":"p","copies":0}`,
			`{"resource":"t/gcra","domain":"p","copies":0}`,
			`{"resource":"t/tiers","domain":"p","copies":0}`,
			`{"resource":"open/any","domain":"p","copies":2,"min_copies":1}`,
			`{"resource":"t/none","domain":"p"}`,
		}
		mp := []any{
			map[string]any{"resource": "t/shadow", "domain": "s"},
			map[string]any{"resource": "t/shadow", "domain": "s"},
			map[string]any{"resource": "t/gcra", "domain": "p", "copies": 0},
			map[string]any{"resource": "t/gcra", "domain": "p", "copies": 0},
			map[string]any{"resource": "t/tiers", "domain": "p", "copies": 0},
			map[string]any{"resource": "open/any", "domain": "p", "copies": 2, "min_copies": 1},
			map[string]any{"resource": "t/none", "domain": "p"},
		}
		rs := h.batch(asMsgpack, batchJSON(items...), mp)
		get := func(i int) map[string]any { return rs[i].(map[string]any) }
		if get(0)["shadow"] != false || get(1)["shadow"] != true || get(1)["granted"] != int64(1) {
			t.Errorf("shadow: %v, %v", get(0), get(1))
		}
		for _, i := range []int{2, 3} { // a peek spends nothing
			if get(i)["granted"] != int64(0) || get(i)["remaining"] != int64(20) {
				t.Errorf("peek %d: %v", i, get(i))
			}
		}
		if get(4)["tier"] != int64(0) || get(4)["tier_hits"] != int64(0) {
			t.Errorf("tiers peek: %v", get(4))
		}
		if get(5)["lenient"] != true || get(5)["granted"] != int64(2) {
			t.Errorf("lenient: %v", get(5))
		}
		if get(6)["retry_after_ms"] != int64(-1) || get(6)["granted"] != int64(0) {
			t.Errorf("no tiers: %v", get(6))
		}
	})
}

func TestBatchLimits(t *testing.T) {
	both(t, func(t *testing.T, h *harness, asMsgpack bool) {
		items := func(n int) (string, []any) {
			js := make([]string, n)
			mp := make([]any, n)
			for i := range n {
				js[i] = `{"resource":"t/gcra","domain":"d"}`
				mp[i] = map[string]any{"resource": "t/gcra", "domain": "d"}
			}
			return batchJSON(js...), mp
		}
		// None: an empty list.
		js, mp := items(0)
		if rs := h.batch(asMsgpack, js, mp); len(rs) != 0 {
			t.Errorf("empty batch: %v", rs)
		}
		// 1000, one bucket of 20: 20 granted, in the first 20.
		js, mp = items(maxBatch)
		rs := h.batch(asMsgpack, js, mp)
		if len(rs) != maxBatch {
			t.Fatalf("%d responses, want %d", len(rs), maxBatch)
		}
		for i, r := range rs {
			want := int64(0)
			if i < 20 {
				want = 1
			}
			if g := r.(map[string]any)["granted"]; g != want {
				t.Fatalf("item %d granted %v, want %d", i, g, want)
			}
		}
		// 1001: too large, and nothing decided.
		h.clock.set(t0.Add(time.Hour))
		js, mp = items(maxBatch + 1)
		var r reply
		if asMsgpack {
			r = h.do("POST", "/v1/batch", mpBody(t, map[string]any{"requests": mp}), hdrSendMsgpack, hdrAcceptMsgpack)
		} else {
			r = h.post("/v1/batch", js)
		}
		var code, msg string
		if asMsgpack {
			code, msg = mpError(t, r)
		} else {
			code, msg = errorReply(t, r.body)
		}
		if r.status != 413 || code != "too_large" || !strings.Contains(msg, "1000") || !strings.Contains(msg, "split") {
			t.Errorf("1001 items: %d %s %q", r.status, code, msg)
		}
		if m := h.ok("/v1/request", `{"resource":"t/gcra","domain":"d","copies":0}`); num(t, m, "remaining") != 20 {
			t.Errorf("a refused batch spent: %v", m)
		}
	})
}

func TestBatchBodyOver64KiB(t *testing.T) {
	h := newHarness(t)
	long := strings.Repeat("x", 250)
	var items []string
	for range 300 { // about 78 KB: fewer than 1000 items, more than 64 KiB
		items = append(items, `{"resource":"t/gcra","domain":"`+long+`"}`)
	}
	r := h.post("/v1/batch", batchJSON(items...))
	if code, msg := errorReply(t, r.body); r.status != 413 || code != "too_large" || !strings.Contains(msg, "65536") {
		t.Errorf("78 KB batch: %d %s %s", r.status, code, msg)
	}
}

func TestBatchMalformedEnvelope(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name, body string
		names      []string
	}{
		{name: "empty body", body: ``, names: []string{"requests", "missing"}},
		{name: "no requests", body: `{}`, names: []string{"requests", "missing"}},
		{name: "requests not an array", body: `{"requests":{}}`, names: []string{"requests", "array"}},
		{name: "requests null", body: `{"requests":null}`, names: []string{"requests", "array", "null"}},
		{name: "requests twice", body: `{"requests":[],"requests":[]}`, names: []string{"requests", "twice"}},
		{name: "unknown field", body: `{"requests":[],"atomic":true}`, names: []string{"atomic", "unknown field"}},
		{name: "not an object", body: `[]`, names: []string{"body", "object"}},
		{name: "truncated after items", body: `{"requests":[{"resource":"t/gcra","domain":"d"},`, names: []string{"requests"}},
		{name: "syntax error in an item", body: `{"requests":[{"resource":"t/gcra","domain":"d"},{"resource":"t/gcra","domain":}]}`, names: []string{"requests", "invalid JSON"}},
		{name: "syntax error after an item error", body: `{"requests":[{"resource":"t/gcra","domain":"d","copies":-1 x}]}`, names: []string{"requests", "invalid JSON"}},
		{name: "trailing data", body: `{"requests":[]} []`, names: []string{"body", "after"}},
		{name: "trailing comma", body: `{"requests":[{"resource":"t/gcra","domain":"d"},]}`, names: []string{"requests", "element"}},
	} {
		r := h.post("/v1/batch", tc.body)
		code, msg := errorReply(t, r.body)
		if r.status != 400 || code != "bad_request" {
			t.Errorf("%s: %d %s %q", tc.name, r.status, code, msg)
		}
		for _, n := range tc.names {
			if !strings.Contains(msg, n) {
				t.Errorf("%s: message %q does not name %q", tc.name, msg, n)
			}
		}
	}
	// Nothing was spent by the refused batches.
	if m := h.ok("/v1/request", `{"resource":"t/gcra","domain":"d","copies":0}`); num(t, m, "remaining") != 20 {
		t.Errorf("a refused batch spent: %v", m)
	}
}

func TestBatchEscapedStrings(t *testing.T) {
	h := newHarness(t)
	// Unescaped strings of every item must survive the next items' reading.
	rs := h.batch(false, batchJSON(
		`{"resource":"\u0074/gcra","domain":"caf\u00e9","copies":2}`,
		`{"resource":"t/gcr\u0061","domain":"\u0063af\u00e9 2","copies":3}`,
		`{"resource":"t/gcra","domain":"café","copies":0}`,
		`{"resource":"t/gcra","domain":"café 2","copies":0}`,
	), nil)
	if rs[2].(map[string]any)["remaining"] != int64(18) || rs[3].(map[string]any)["remaining"] != int64(17) {
		t.Errorf("escaped domains: %v", rs)
	}
}

// TestBatchReadsTheClockPerItem checks that every item is decided at the
// clock's reading when its turn comes.
func TestBatchReadsTheClockPerItem(t *testing.T) {
	var calls atomic.Int64
	s := New(testEngine(t), Options{
		Now:    func() time.Time { return t0.Add(time.Duration(calls.Add(1)) * 50 * time.Millisecond) },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	calls.Store(0) // New reads it once (the /v1/top windows start then)
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("/v1/batch")
	// t/thirds: burst 3, one token per 333 ms; 50 ms between items.
	ctx.Request.Header.SetContentType(contentTypeJSON)
	ctx.Request.SetBody([]byte(batchJSON(strings.Repeat(`{"resource":"t/thirds","domain":"d","copies":0},`, 4) +
		`{"resource":"t/thirds","domain":"d","copies":3}`)))
	s.Handler(&ctx)
	if ctx.Response.StatusCode() != 200 {
		t.Fatalf("%d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	if n := calls.Load(); n != 5 {
		t.Errorf("the clock was read %d times for 5 items", n)
	}
}

// TestBatchAllocations checks that a batch allocates nothing per item: a
// batch of 100 allocates no more than a batch of 1 (in both formats), give
// or take the pool refills after a GC (a fraction of one on average).
func TestBatchAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	for _, asMsgpack := range []bool{false, true} {
		allocs := func(n int) float64 {
			s, ctx := batchBench(t, n, asMsgpack)
			var conn bytes.Buffer
			return testing.AllocsPerRun(50, func() {
				ctx.Response.Reset()
				s.Handler(ctx)
				conn.Reset()
				if err := ctx.Response.BodyWriteTo(&conn); err != nil || ctx.Response.StatusCode() != 200 {
					t.Fatalf("%d %v %s", ctx.Response.StatusCode(), err, conn.Bytes())
				}
			})
		}
		one, hundred := allocs(1), allocs(100)
		if hundred >= one+1 || one >= 1 {
			t.Errorf("MessagePack %v: a batch of 1 allocates %v times, of 100 %v times; want none", asMsgpack, one, hundred)
		}
	}
}

// TestBatchCountsItsDecisions checks that a batch's decisions are counted
// in /metrics like those of /v1/request, and observed.
func TestBatchCountsItsDecisions(t *testing.T) {
	h := newHarness(t)
	h.batch(false, batchJSON(
		`{"resource":"t/gcra","domain":"m","copies":20}`,
		`{"resource":"t/gcra","domain":"m"}`,
		`{"resource":"t/gcra","domain":"m","copies":-1}`,
	), nil)
	r := h.do("GET", "/metrics", "")
	for _, want := range []string{
		`obol_decisions_total{outcome="granted",resource="t/gcra"} 1`,
		`obol_decisions_total{outcome="rejected",resource="t/gcra"} 1`,
		`obol_decision_duration_seconds_count{resource="t/gcra"} 2`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
