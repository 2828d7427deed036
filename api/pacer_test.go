package api

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// pacerConfig is the config of the pacer handler tests.
const pacerConfig = `
namespaces:
  open: {allow_unconfigured: true}
  off: {ignore_configured: true}
resources:
  t/api: {kind: pacer, quota: 4500, period: 1h, jitter: 0}
  t/backoff: {kind: pacer, quota: 4500, period: 1h, jitter: 0, strategy: exponential_backoff}
  t/gcra: {kind: gcra, burst: 20, count: 20, period: 1s}
  t/login: {kind: adaptive, min_window: 1, max_window: 2}
  off/api: {kind: pacer, quota: 10, period: 1s}
`

func pacerEngine(t testing.TB) *local.Engine {
	t.Helper()
	cfg, err := config.Parse([]byte(pacerConfig))
	if err != nil {
		t.Fatalf("pacer test config: %v", err)
	}
	return local.New(cfg)
}

func newPacerHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	h.srv.SetEngine(pacerEngine(t))
	return h
}

// TestPaceObserve steps the KeepReserve pacer of t/api over fixed instants
// through the endpoints: the replies are exact.
func TestPaceObserve(t *testing.T) {
	h := newPacerHarness(t)
	// t0: nothing known, the first call goes at once.
	if r := h.post("/v1/pace", `{"resource":"t/api"}`); r.status != 200 || string(r.body) != `{"wait_ms":0}` {
		t.Fatalf("first pace: %d %s", r.status, r.body)
	}
	// +100 ms: the reply was a 429 (a bare RateLimit-Remaining of 0). The
	// pacer now paces at 1.25·exp(−22.5/20) = 0.405816/s at an empty
	// quota, one call every 2.464171 s from the first: wait 2.364171 s,
	// rounded up to 2365 ms.
	h.clock.set(t0.Add(100 * time.Millisecond))
	r := h.post("/v1/observe", `{"resource":"t/api","status":429,"ratelimit_remaining":"0"}`)
	if r.status != 200 || string(r.body) != `{"wait_ms":2365,"remaining":0,"rate_per_s":0.405816}` {
		t.Fatalf("observe 429: %d %s", r.status, r.body)
	}
	if r := h.post("/v1/pace", `{"resource":"t/api"}`); string(r.body) != `{"wait_ms":2365}` {
		t.Fatalf("pace after the 429: %s", r.body)
	}
	// The next caller gets the slot after: 2·2.464171 − 0.1 s.
	if r := h.post("/v1/pace", `{"resource":"t/api"}`); string(r.body) != `{"wait_ms":4829}` {
		t.Fatalf("the next caller: %s", r.body)
	}
	// The draft-11 RateLimit field, two policies: the smallest r counts;
	// 4000 left is far above the reserve, so the pacer stops pacing.
	h.clock.set(t0.Add(200 * time.Millisecond))
	r = h.post("/v1/observe", `{"resource":"t/api","status":200,"ratelimit":"\"hour\";r=4000;t=3600, \"burst\";r=4500;t=1"}`)
	if r.status != 200 || string(r.body) != `{"wait_ms":0,"remaining":4000}` {
		t.Fatalf("observe RateLimit: %d %s", r.status, r.body)
	}
	// A plain count, and a reply that reports none: the last count stays.
	if r := h.post("/v1/observe", `{"resource":"t/api","status":200,"remaining":3999}`); string(r.body) != `{"wait_ms":0,"remaining":3999}` {
		t.Fatalf("observe remaining: %s", r.body)
	}
	if r := h.post("/v1/observe", `{"resource":"t/api","status":200,"ratelimit":"","ratelimit_remaining":""}`); string(r.body) != `{"wait_ms":0,"remaining":3999}` {
		t.Fatalf("observe without a count: %s", r.body)
	}
	// GET /v1/state shows the same (the domain is required and ignored).
	st := decodeObject(t, h.do("GET", "/v1/state?resource=t/api&domain=-", "").body)
	p, _ := st["pacer"].(map[string]any)
	if st["kind"] != "pacer" || p == nil || p["wait_ms"] != json.Number("0") || p["remaining"] != json.Number("3999") || p["rate_per_s"] != nil {
		t.Fatalf("state %v", st)
	}
}

func TestPaceObserveBackoffAndRateLimitWins(t *testing.T) {
	h := newPacerHarness(t)
	h.ok("/v1/pace", `{"resource":"t/backoff"}`)
	// A 429 with both raw values: RateLimit's count is the one taken.
	r := h.post("/v1/observe", `{"resource":"t/backoff","status":429,"ratelimit":"\"p\";r=0;t=5","ratelimit_remaining":"7"}`)
	if r.status != 200 || string(r.body) != `{"wait_ms":800,"remaining":0}` {
		t.Fatalf("observe 429: %d %s", r.status, r.body)
	}
	if r := h.post("/v1/pace", `{"resource":"t/backoff"}`); string(r.body) != `{"wait_ms":800}` {
		t.Fatalf("the retry: %s", r.body)
	}
	// RateLimit-Remaining alone, a list: the smallest.
	if r := h.post("/v1/observe", `{"resource":"t/backoff","status":200,"ratelimit_remaining":"9, 3"}`); string(r.body) != `{"wait_ms":0,"remaining":3}` {
		t.Fatalf("observe list: %s", r.body)
	}
	st := decodeObject(t, h.do("GET", "/v1/state?resource=t/backoff&domain=x", "").body)
	if p, _ := st["pacer"].(map[string]any); p == nil || p["remaining"] != json.Number("3") {
		t.Fatalf("state %v", st)
	}
}

func TestPaceLenient(t *testing.T) {
	h := newPacerHarness(t)
	for _, res := range []string{"open/anything", "off/api"} {
		if r := h.post("/v1/pace", `{"resource":"`+res+`"}`); r.status != 200 || string(r.body) != `{"wait_ms":0,"lenient":true}` {
			t.Fatalf("%s: pace %d %s", res, r.status, r.body)
		}
		if r := h.post("/v1/observe", `{"resource":"`+res+`","status":429}`); r.status != 200 || string(r.body) != `{"wait_ms":0,"lenient":true}` {
			t.Fatalf("%s: observe %d %s", res, r.status, r.body)
		}
	}
	if st := decodeObject(t, h.do("GET", "/v1/state?resource=off/api&domain=x", "").body); st["pacer"] != nil {
		t.Fatalf("a pacer whose namespace ignores it has state: %v", st)
	}
}

func TestPaceObserveMsgpack(t *testing.T) {
	h := newPacerHarness(t)
	mp := []string{"Content-Type: application/msgpack", "Accept: application/msgpack"}
	r := h.do("POST", "/v1/pace", mpBody(t, map[string]any{"resource": "t/api"}), mp...)
	var p map[string]any
	if err := msgpack.Unmarshal(r.body, &p); err != nil || r.status != 200 || r.header.Get("Content-Type") != contentTypeMsgpack || len(p) != 1 || p["wait_ms"] != int8(0) {
		t.Fatalf("pace: %d %#v %v", r.status, p, err)
	}
	h.clock.set(t0.Add(100 * time.Millisecond))
	r = h.do("POST", "/v1/observe", mpBody(t, map[string]any{"resource": "t/api", "status": 429, "ratelimit": `"p";r=0;t=9`}), mp...)
	var o map[string]any
	if err := msgpack.Unmarshal(r.body, &o); err != nil || r.status != 200 {
		t.Fatalf("observe: %d %v", r.status, err)
	}
	if o["wait_ms"] != uint16(2365) || o["remaining"] != int8(0) || o["rate_per_s"] != 0.405816 {
		t.Fatalf("observe reply %#v", o)
	}
	// The same fields, in the same order, as the JSON reply.
	keys := []string{}
	dec := msgpack.NewDecoder(bytes.NewReader(r.body))
	n, _ := dec.DecodeMapLen()
	for range n {
		k, _ := dec.DecodeString()
		keys = append(keys, k)
		_ = dec.Skip()
	}
	if strings.Join(keys, ",") != "wait_ms,remaining,rate_per_s" {
		t.Fatalf("keys %v", keys)
	}
	r = h.do("POST", "/v1/observe", mpBody(t, map[string]any{"resource": "t/gcra", "status": 200}), mp...)
	var e map[string]map[string]string
	if err := msgpack.Unmarshal(r.body, &e); err != nil || r.status != 409 || e["error"]["code"] != codeWrongKind {
		t.Fatalf("wrong kind: %d %#v %v", r.status, e, err)
	}
}

// TestPacerMalformed sends pacer requests that must be refused and checks
// the status, the code and that the message names what is wrong and what
// was expected.
func TestPacerMalformed(t *testing.T) {
	h := newPacerHarness(t)
	msgp := []string{"Content-Type: application/msgpack"}
	cases := []struct {
		name    string
		method  string
		path    string
		body    string
		headers []string
		status  int
		code    string
		names   []string
	}{
		{name: "empty pace", path: "/v1/pace", body: ``, status: 400, code: "bad_request", names: []string{"resource", "missing"}},
		{name: "pace with a status", path: "/v1/pace", body: `{"resource":"t/api","status":200}`, status: 400, code: "bad_request", names: []string{"status", "unknown field", "expected one of resource"}},
		{name: "observe without status", path: "/v1/observe", body: `{"resource":"t/api"}`, status: 400, code: "bad_request", names: []string{"status", "missing"}},
		{name: "observe without resource", path: "/v1/observe", body: `{"status":200}`, status: 400, code: "bad_request", names: []string{"resource", "missing"}},
		{name: "status out of range", path: "/v1/observe", body: `{"resource":"t/api","status":42}`, status: 400, code: "bad_request", names: []string{"status", "[100, 599]", "42"}},
		{name: "status as a string", path: "/v1/observe", body: `{"resource":"t/api","status":"429"}`, status: 400, code: "bad_request", names: []string{"status", "integer", `"429"`}},
		{name: "remaining negative", path: "/v1/observe", body: `{"resource":"t/api","status":200,"remaining":-2}`, status: 400, code: "bad_request", names: []string{"remaining", "[-1, 999999999999999999]", "-2"}},
		{name: "remaining a fraction", path: "/v1/observe", body: `{"resource":"t/api","status":200,"remaining":2.5}`, status: 400, code: "bad_request", names: []string{"remaining", "2.5"}},
		{name: "remaining and a raw value", path: "/v1/observe", body: `{"resource":"t/api","status":200,"remaining":3,"ratelimit":"\"p\";r=3"}`, status: 400, code: "bad_request", names: []string{"remaining", "either", "ratelimit", "not both"}},
		{name: "bad RateLimit", path: "/v1/observe", body: `{"resource":"t/api","status":200,"ratelimit":"\"p\";q=100;w=60"}`, status: 400, code: "bad_request", names: []string{"ratelimit:", `r=4;t=1`, `"\"p\";q=100;w=60"`}},
		{name: "bad RateLimit-Remaining", path: "/v1/observe", body: `{"resource":"t/api","status":200,"ratelimit_remaining":"lots"}`, status: 400, code: "bad_request", names: []string{"ratelimit_remaining", "non-negative integer", `"lots"`}},
		{name: "negative RateLimit-Remaining", path: "/v1/observe", body: `{"resource":"t/api","status":200,"ratelimit_remaining":"-1"}`, status: 400, code: "bad_request", names: []string{"ratelimit_remaining", `"-1"`}},
		{name: "raw value as a number", path: "/v1/observe", body: `{"resource":"t/api","status":200,"ratelimit_remaining":5}`, status: 400, code: "bad_request", names: []string{"ratelimit_remaining", "string"}},
		{name: "raw value too long", path: "/v1/observe", body: `{"resource":"t/api","status":200,"ratelimit":"` + strings.Repeat("a", maxHeaderValue+1) + `"}`, status: 400, code: "bad_request", names: []string{"ratelimit", "8192"}},
		{name: "raw value not UTF-8", path: "/v1/observe", body: "{\"resource\":\"t/api\",\"status\":200,\"ratelimit\":\"\xff\"}", status: 400, code: "bad_request", names: []string{"ratelimit", "UTF-8"}},
		{name: "status twice", path: "/v1/observe", body: `{"resource":"t/api","status":200,"status":429}`, status: 400, code: "bad_request", names: []string{"status", "twice"}},
		{name: "unknown field", path: "/v1/observe", body: `{"resource":"t/api","status":200,"headers":{}}`, status: 400, code: "bad_request", names: []string{"headers", "unknown field", "ratelimit_remaining"}},
		{name: "msgpack status as a string", path: "/v1/observe", body: "\x82\xa8resource\xa5t/api\xa6status\xa3429", headers: msgp, status: 400, code: "bad_request", names: []string{"status", "integer"}},
		{name: "msgpack truncated", path: "/v1/pace", body: "\x81\xa8resource", headers: msgp, status: 400, code: "bad_request", names: []string{"resource", "MessagePack"}},
		{name: "pace unknown resource", path: "/v1/pace", body: `{"resource":"nope/x"}`, status: 404, code: "unknown_resource", names: []string{"nope/x"}},
		{name: "pace on gcra", path: "/v1/pace", body: `{"resource":"t/gcra"}`, status: 409, code: "wrong_kind", names: []string{"t/gcra", "pacer resources"}},
		{name: "observe on adaptive", path: "/v1/observe", body: `{"resource":"t/login","status":200}`, status: 409, code: "wrong_kind", names: []string{"t/login", "an adaptive resource"}},
		{name: "request on a pacer", path: "/v1/request", body: `{"resource":"t/api","domain":"d"}`, status: 409, code: "wrong_kind", names: []string{"t/api", "a pacer resource"}},
		{name: "admit on a pacer", path: "/v1/admit", body: `{"resource":"t/api"}`, status: 409, code: "wrong_kind", names: []string{"t/api", "adaptive resources"}},
		{name: "check on a pacer", method: "GET", path: "/v1/check?resource=t/api&domain=d", status: 409, code: "wrong_kind", names: []string{"t/api"}},
		{name: "wrong method", method: "GET", path: "/v1/pace", status: 405, code: "bad_request", names: []string{"GET", "POST"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = "POST"
			}
			r := h.do(method, tc.path, tc.body, tc.headers...)
			if r.status != tc.status {
				t.Errorf("status %d, want %d; body %s", r.status, tc.status, r.body)
			}
			code, msg := errorReply(t, r.body)
			if code != tc.code {
				t.Errorf("code %q, want %q (message %q)", code, tc.code, msg)
			}
			for _, n := range tc.names {
				if !strings.Contains(msg, n) {
					t.Errorf("message %q does not name %q", msg, n)
				}
			}
		})
	}
	// Nothing was observed by the refused requests.
	if st := decodeObject(t, h.do("GET", "/v1/state?resource=t/api&domain=x", "").body); st["pacer"].(map[string]any)["remaining"] != nil {
		t.Fatalf("a refused observe was recorded: %v", st)
	}
	if strings.Contains(h.logs.String(), "internal") {
		t.Errorf("a client error was logged as internal: %s", h.logs.String())
	}
}

// checkPacer checks what a pacer decoder accepted against encoding/json's
// or msgpack's reading of the same body.
func checkPacer(t *testing.T, b *wireBody, allowed, required fieldSet, m map[string]any) {
	t.Helper()
	if b.seen&^allowed != 0 || required&^b.seen != 0 {
		t.Fatalf("accepted with fields %s (allowed %s, required %s)", b.seen.list(), allowed.list(), required.list())
	}
	if len(b.resource) == 0 || len(b.resource) > maxName || !utf8.Valid(b.resource) || m["resource"] != string(b.resource) {
		t.Fatalf("resource %q accepted (decoder reads %v)", b.resource, m["resource"])
	}
	if b.seen&fStatus != 0 && (b.status < 100 || b.status > 599 || asFloat(m["status"]) != float64(b.status)) {
		t.Fatalf("status %d accepted (decoder reads %v)", b.status, m["status"])
	}
	if b.count < -1 || b.count > local.MaxRemaining {
		t.Fatalf("count %d accepted", b.count)
	}
	switch {
	case b.seen&fRemaining != 0:
		if b.seen&rawHeaderFields != 0 || asFloat(m["remaining"]) != float64(b.remaining) || b.count != b.remaining {
			t.Fatalf("remaining %d (count %d) accepted (decoder reads %v)", b.remaining, b.count, m["remaining"])
		}
	default:
		want := int64(-1)
		rl, _ := m["ratelimit"].(string)
		rr, _ := m["ratelimit_remaining"].(string)
		if n, ok := adaptive.ParseRateLimitRemaining(rr); ok {
			want = int64(n)
		} else if rr != "" {
			t.Fatalf("ratelimit_remaining %q accepted", rr)
		}
		if n, ok := adaptive.ParseRateLimit(rl); ok {
			want = int64(n)
		} else if rl != "" {
			t.Fatalf("ratelimit %q accepted", rl)
		}
		if b.count != want {
			t.Fatalf("count %d from %q / %q, want %d", b.count, rl, rr, want)
		}
	}
}

func asFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case float32:
		return float64(x)
	case json.Number:
		f, _ := x.Float64()
		return f
	case int8:
		return float64(x)
	case int16:
		return float64(x)
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	case uint8:
		return float64(x)
	case uint16:
		return float64(x)
	case uint32:
		return float64(x)
	case uint64:
		return float64(x)
	}
	return math.NaN()
}

func fuzzPacer(f *testing.F, allowed, required fieldSet, mp bool) {
	f.Fuzz(func(t *testing.T, data []byte) {
		c := getCall()
		defer putCall(c)
		b := &c.body
		var err error
		if mp {
			err = b.decodeMsgpack(data, allowed, required)
		} else {
			err = b.decode(data, allowed, required)
		}
		if err != nil {
			status, code, msg, ok := classify(err)
			if !ok || status != 400 || code != codeBadRequest || msg == "" {
				t.Fatalf("decode error %v classifies as %d %s %v", err, status, code, ok)
			}
			return
		}
		var m map[string]any
		if mp {
			if err := msgpack.Unmarshal(data, &m); err != nil {
				t.Fatalf("accepted a body msgpack.Unmarshal refuses (%v): %q", err, data)
			}
		} else {
			d := json.NewDecoder(bytes.NewReader(data))
			d.UseNumber()
			if err := d.Decode(&m); err != nil || d.More() {
				t.Fatalf("accepted a body encoding/json refuses (%v): %q", err, data)
			}
		}
		checkPacer(t, b, allowed, required, m)
	})
}

func pacerSeeds(f *testing.F, mp bool) {
	for _, v := range []map[string]any{
		{"resource": "t/api"},
		{"resource": "t/api", "status": 429},
		{"resource": "t/api", "status": 200, "remaining": 42},
		{"resource": "t/api", "status": 200, "remaining": -1},
		{"resource": "t/api", "status": 200, "ratelimit": `"day";r=100;t=3600, "second";r=2;t=1`},
		{"resource": "t/api", "status": 200, "ratelimit_remaining": "9, 3"},
		{"resource": "t/api", "status": 200, "ratelimit": "limit=10, remaining=6, reset=2", "ratelimit_remaining": "7"},
		{"resource": "t/api", "status": 200, "ratelimit": "", "ratelimit_remaining": ""},
		{"resource": "t/api", "status": 200, "ratelimit": `"p";q=1`},
	} {
		if mp {
			b, err := msgpack.Marshal(v)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		} else {
			b, err := json.Marshal(v)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	if !mp {
		f.Add([]byte(`{"resource":"t/api","status":2e2,"remaining":1.0}`))
		f.Add([]byte(`{"resource":"t\u002fapi","status":200,"ratelimit":"\"a\\\"b\";r=1"}`))
	}
}

func FuzzDecodePace(f *testing.F) {
	pacerSeeds(f, false)
	fuzzPacer(f, paceFields, paceFields, false)
}

func FuzzDecodeObserve(f *testing.F) {
	pacerSeeds(f, false)
	fuzzPacer(f, observeFields, observeRequired, false)
}

func FuzzDecodeObserveMsgpack(f *testing.F) {
	pacerSeeds(f, true)
	fuzzPacer(f, observeFields, observeRequired, true)
}

// BenchmarkPaceObserveHandlers runs POST /v1/pace then POST /v1/observe
// (with a raw RateLimit value) through the route table and handlers,
// without the network.
func BenchmarkPaceObserveHandlers(b *testing.B) {
	s := New(pacerEngine(b), Options{
		Now:    func() time.Time { return t0 },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	var pace, observe fasthttp.RequestCtx
	pace.Request.Header.SetMethod("POST")
	pace.Request.SetRequestURI("/v1/pace")
	pace.Request.Header.SetContentType(contentTypeJSON)
	pace.Request.SetBody([]byte(`{"resource":"t/api"}`))
	observe.Request.Header.SetMethod("POST")
	observe.Request.SetRequestURI("/v1/observe")
	observe.Request.Header.SetContentType(contentTypeJSON)
	observe.Request.SetBody([]byte(`{"resource":"t/api","status":200,"ratelimit":"\"hour\";r=30;t=3600"}`))
	b.ReportAllocs()
	for b.Loop() {
		pace.Response.Reset()
		s.Handler(&pace)
		if pace.Response.StatusCode() != 200 {
			b.Fatalf("pace: %d %s", pace.Response.StatusCode(), pace.Response.Body())
		}
		observe.Response.Reset()
		s.Handler(&observe)
		if observe.Response.StatusCode() != 200 {
			b.Fatalf("observe: %d %s", observe.Response.StatusCode(), observe.Response.Body())
		}
	}
}

// TestPacerMetrics: pace and observe are counted by outcome, and a pacer's
// wait, rate and last remaining count are on /metrics (they once were not,
// and the dashboard's row for a pacer stayed empty).
func TestPacerMetrics(t *testing.T) {
	h := newPacerHarness(t)
	h.ok("/v1/pace", `{"resource":"t/api"}`) // at once
	h.clock.set(t0.Add(100 * time.Millisecond))
	h.ok("/v1/observe", `{"resource":"t/api","status":429,"ratelimit_remaining":"0"}`)
	h.ok("/v1/pace", `{"resource":"t/api"}`) // waits 2365 ms
	h.ok("/v1/observe", `{"resource":"t/api","status":200,"remaining":0}`)
	h.ok("/v1/pace", `{"resource":"off/api"}`) // ignore_configured: lenient
	page := string(h.do("GET", "/metrics", "").body)
	for _, want := range []string{
		`obol_pacer_operations_total{op="pace",outcome="now",resource="t/api"} 1`,
		`obol_pacer_operations_total{op="pace",outcome="waited",resource="t/api"} 1`,
		`obol_pacer_operations_total{op="observe",outcome="limited",resource="t/api"} 1`,
		`obol_pacer_operations_total{op="observe",outcome="ok",resource="t/api"} 1`,
		`obol_pacer_operations_total{op="pace",outcome="lenient",resource="off/api"} 1`,
		`obol_pacer_remaining{resource="t/api"} 0`,
		`obol_pacer_rate_per_second{resource="t/api"} 0.4058`,
		`obol_pacer_wait_seconds{resource="t/api"} `,
		`obol_pacer_wait_seconds{resource="t/backoff"} 0`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// A pacer that has seen no count has no remaining series, and one that
	// does not space calls no rate.
	for _, absent := range []string{`obol_pacer_remaining{resource="t/backoff"}`, `obol_pacer_rate_per_second{resource="t/backoff"}`} {
		if strings.Contains(page, absent) {
			t.Errorf("/metrics has %q", absent)
		}
	}
}

// TestEveryKindOnMetrics: a resource of each kind (config.Kinds) has a
// series of its own kind's on /metrics, read at scrape time, before any
// call: a new kind must name its family here, and a kind whose resources
// show nowhere (as pacers once did) fails.
func TestEveryKindOnMetrics(t *testing.T) {
	family := map[config.Kind]string{
		config.KindTiers:    "obol_tracked_keys",
		config.KindGCRA:     "obol_tracked_keys",
		config.KindCopies:   "obol_holds",
		config.KindAdaptive: "obol_adaptive_window",
		config.KindPacer:    "obol_pacer_wait_seconds",
	}
	cfg, err := config.Parse([]byte(`
resources:
  k/tiers: {kind: tiers, tiers: "5,1,1,0"}
  k/gcra: {kind: gcra, burst: 1, count: 1, period: 1s}
  k/copies: {kind: copies, global_limit: 2}
  k/adaptive: {kind: adaptive, min_window: 1, max_window: 2}
  k/pacer: {kind: pacer, quota: 10, period: 1s}
`))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	h.srv.SetEngine(local.New(cfg))
	page := string(h.do("GET", "/metrics", "").body)
	for _, k := range config.Kinds {
		f, ok := family[k]
		if !ok {
			t.Errorf("kind %s: no family named for it here", k)
			continue
		}
		if want := f + `{resource="k/` + string(k) + `"}`; !strings.Contains(page, want) {
			t.Errorf("kind %s: /metrics lacks %s", k, want)
		}
	}
}
