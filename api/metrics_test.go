package api

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// obsConfig is the config of the observability tests: a resource of each
// kind, and shadow ones.
const obsConfig = `
namespaces:
  open: {allow_unconfigured: true}
resources:
  o/tiers: {kind: tiers, tiers: "2,1,1,0"}
  o/gcra: {kind: gcra, burst: 1, count: 1, period: 1s}
  o/gshadow: {kind: gcra, burst: 1, count: 1, period: 1s, shadow: true}
  o/jobs: {kind: copies, domain_limit: 5}
  o/cshadow: {kind: copies, domain_limit: 1, shadow: true}
  o/login: {kind: adaptive, min_window: 1, max_window: 2, grow_every: 1, margin: 1, timeout: 10s}
  o/ashadow: {kind: adaptive, min_window: 1, max_window: 1, shadow: true}
`

func obsEngine(t testing.TB) *local.Engine {
	t.Helper()
	cfg, err := config.Parse([]byte(obsConfig))
	if err != nil {
		t.Fatalf("observability test config: %v", err)
	}
	return local.New(cfg)
}

func newObsHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	h.srv.SetEngine(obsEngine(t))
	return h
}

// counters returns every obol_*_total counter of s as "name{label=value,...}"
// (labels sorted) → value.
func counters(t testing.TB, s *Server) map[string]float64 {
	t.Helper()
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "obol_") || !strings.HasSuffix(mf.GetName(), "_total") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			slices.Sort(ls)
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = m.GetCounter().GetValue()
		}
	}
	return out
}

// moved returns the counters that differ between before and after, with
// their change.
func moved(before, after map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for k, v := range after {
		if v != before[k] {
			d[k] = v - before[k]
		}
	}
	for k, v := range before {
		if _, ok := after[k]; !ok {
			d[k] = -v
		}
	}
	return d
}

// TestMetricsCountEveryOutcome runs one operation (or a few) per step and
// checks that exactly the expected counters moved, by exactly the expected
// amounts, and no other.
func TestMetricsCountEveryOutcome(t *testing.T) {
	h := newObsHarness(t)
	sess := str(t, h.ok("/v1/sessions", `{"ttl_ms":60000}`), "session")
	var hold, transfer, ticket1, ticket2, ticket3 string
	const (
		dec  = "obol_decisions_total"
		cop  = "obol_copies_operations_total"
		adap = "obol_adaptive_operations_total"
	)
	steps := []struct {
		name string
		do   func()
		want map[string]float64
	}{
		{"a grant", func() { h.ok("/v1/request", `{"resource":"o/gcra","domain":"a"}`) },
			map[string]float64{dec + "{outcome=granted,resource=o/gcra}": 1}},
		{"a rejection", func() { h.ok("/v1/request", `{"resource":"o/gcra","domain":"a"}`) },
			map[string]float64{dec + "{outcome=rejected,resource=o/gcra}": 1}},
		{"a peek is not a rejection", func() { h.ok("/v1/request", `{"resource":"o/gcra","domain":"a","copies":0}`) },
			map[string]float64{dec + "{outcome=peek,resource=o/gcra}": 1}},
		{"a shadow grant", func() {
			h.ok("/v1/request", `{"resource":"o/gshadow","domain":"a"}`)
			h.ok("/v1/request", `{"resource":"o/gshadow","domain":"a"}`)
		}, map[string]float64{dec + "{outcome=granted,resource=o/gshadow}": 1, dec + "{outcome=shadow,resource=o/gshadow}": 1}},
		{"an unconfigured resource, leniently", func() { h.ok("/v1/request", `{"resource":"open/x","domain":"a"}`) },
			map[string]float64{dec + "{outcome=lenient,resource=unconfigured}": 1}},
		{"/v1/check", func() {
			h.do("GET", "/v1/check?resource=o/tiers&domain=c", "")
			h.do("GET", "/v1/check?resource=o/tiers&domain=c&copies=2", "")
		}, map[string]float64{dec + "{outcome=granted,resource=o/tiers}": 1, dec + "{outcome=rejected,resource=o/tiers}": 1}},
		{"batch items count like requests; an item's error counts nothing", func() {
			h.batch(false, batchJSON(
				`{"resource":"o/tiers","domain":"b","copies":2}`,
				`{"resource":"o/tiers","domain":"b"}`,
				`{"resource":"o/tiers","domain":"b","copies":0}`,
				`{"resource":"o/tiers","domain":"b","copies":-1}`,
				`{"resource":"nope/x","domain":"b"}`,
			), nil)
		}, map[string]float64{dec + "{outcome=granted,resource=o/tiers}": 1, dec + "{outcome=rejected,resource=o/tiers}": 1,
			dec + "{outcome=peek,resource=o/tiers}": 1}},
		{"an error counts nothing", func() { h.post("/v1/request", `{"resource":"nope/x","domain":"a"}`) }, map[string]float64{}},

		{"reserve: all asked", func() {
			hold = str(t, h.ok("/v1/reserve", `{"resource":"o/jobs","domain":"d","copies":2,"session":"`+sess+`"}`), "hold")
		}, map[string]float64{cop + "{op=reserve,outcome=granted,resource=o/jobs}": 1}},
		{"reserve: fewer than asked", func() {
			h.ok("/v1/reserve", `{"resource":"o/jobs","domain":"d","copies":4,"min_copies":1,"session":"`+sess+`"}`)
		}, map[string]float64{cop + "{op=reserve,outcome=partial,resource=o/jobs}": 1}},
		{"reserve: none left", func() {
			h.ok("/v1/reserve", `{"resource":"o/jobs","domain":"d","copies":1,"session":"`+sess+`"}`)
		}, map[string]float64{cop + "{op=reserve,outcome=rejected,resource=o/jobs}": 1}},
		{"reserve: a peek", func() {
			h.ok("/v1/reserve", `{"resource":"o/jobs","domain":"d","copies":0,"session":"`+sess+`"}`)
		}, map[string]float64{cop + "{op=reserve,outcome=peek,resource=o/jobs}": 1}},
		{"reserve: shadow", func() {
			h.ok("/v1/reserve", `{"resource":"o/cshadow","domain":"d","copies":2,"session":"`+sess+`"}`)
		}, map[string]float64{cop + "{op=reserve,outcome=shadow,resource=o/cshadow}": 1}},
		{"reserve: unconfigured", func() {
			h.ok("/v1/reserve", `{"resource":"open/jobs","domain":"d","session":"`+sess+`"}`)
		}, map[string]float64{cop + "{op=reserve,outcome=lenient,resource=unconfigured}": 1}},
		{"release", func() { h.ok("/v1/release", `{"hold":"`+hold+`","copies":1}`) },
			map[string]float64{cop + "{op=release,outcome=ok,resource=o/jobs}": 1}},
		{"transfer", func() { transfer = str(t, h.ok("/v1/transfer", `{"hold":"`+hold+`","copies":1}`), "transfer") },
			map[string]float64{cop + "{op=transfer,outcome=ok,resource=o/jobs}": 1}},
		{"seize", func() { h.ok("/v1/seize", `{"transfer":"`+transfer+`","session":"`+sess+`"}`) },
			map[string]float64{cop + "{op=seize,outcome=ok,resource=o/jobs}": 1}},
		{"release of a hold that is gone counts nothing", func() { h.post("/v1/release", `{"hold":"`+hold+`"}`) },
			map[string]float64{}},

		{"admit: two admitted, one rejected", func() {
			ticket1 = str(t, h.ok("/v1/admit", `{"resource":"o/login"}`), "ticket")
			ticket2 = str(t, h.ok("/v1/admit", `{"resource":"o/login"}`), "ticket")
			h.ok("/v1/admit", `{"resource":"o/login"}`)
		}, map[string]float64{adap + "{op=admit,outcome=admitted,resource=o/login}": 2, adap + "{op=admit,outcome=rejected,resource=o/login}": 1}},
		{"admit: shadow", func() {
			h.ok("/v1/admit", `{"resource":"o/ashadow"}`)
			h.ok("/v1/admit", `{"resource":"o/ashadow"}`)
		}, map[string]float64{adap + "{op=admit,outcome=admitted,resource=o/ashadow}": 1, adap + "{op=admit,outcome=shadow,resource=o/ashadow}": 1}},
		{"admit: unconfigured", func() { h.ok("/v1/admit", `{"resource":"open/a"}`) },
			map[string]float64{adap + "{op=admit,outcome=lenient,resource=unconfigured}": 1}},
		{"complete: success", func() { h.ok("/v1/complete", `{"ticket":"`+ticket1+`","outcome":"success"}`) },
			map[string]float64{adap + "{op=complete,outcome=success,resource=o/login}": 1}},
		{"complete: unknown (completed already)", func() { h.post("/v1/complete", `{"ticket":"`+ticket1+`","outcome":"backoff"}`) },
			map[string]float64{adap + "{op=complete,outcome=unknown,resource=o/login}": 1}},
		{"complete: a made-up ticket is unknown, unconfigured", func() { h.post("/v1/complete", `{"ticket":"zz#1","outcome":"success"}`) },
			map[string]float64{adap + "{op=complete,outcome=unknown,resource=unconfigured}": 1}},
		{"expired: the engine expires a ticket outstanding for the timeout", func() {
			h.clock.set(t0.Add(10 * time.Second))
			ticket3 = str(t, h.ok("/v1/admit", `{"resource":"o/login"}`), "ticket") // sweeps ticket2 first
		}, map[string]float64{adap + "{op=complete,outcome=expired,resource=o/login}": 1, adap + "{op=admit,outcome=admitted,resource=o/login}": 1}},
		{"complete: backoff", func() { h.ok("/v1/complete", `{"ticket":"`+ticket3+`","outcome":"backoff"}`) },
			map[string]float64{adap + "{op=complete,outcome=backoff,resource=o/login}": 1}},
		{"the expired ticket completes late: unknown", func() { h.post("/v1/complete", `{"ticket":"`+ticket2+`","outcome":"success"}`) },
			map[string]float64{adap + "{op=complete,outcome=unknown,resource=o/login}": 1}},
	}
	before := counters(t, h.srv)
	for _, s := range steps {
		s.do()
		after := counters(t, h.srv)
		if got := moved(before, after); !maps.Equal(got, s.want) {
			t.Errorf("%s: moved %v, want %v", s.name, got, s.want)
		}
		before = after
	}
}

// TestMetricsSeriesByKind checks that a resource has the series of its
// kind only (and the rate decisions', which every resource had before the
// other kinds had their own), and that the unconfigured label has all.
func TestMetricsSeriesByKind(t *testing.T) {
	h := newObsHarness(t)
	c := counters(t, h.srv)
	for _, tc := range []struct {
		key  string
		want bool
	}{
		{"obol_decisions_total{outcome=granted,resource=o/gcra}", true},
		{"obol_copies_operations_total{op=reserve,outcome=granted,resource=o/gcra}", false},
		{"obol_adaptive_operations_total{op=admit,outcome=admitted,resource=o/gcra}", false},
		{"obol_copies_operations_total{op=seize,outcome=ok,resource=o/jobs}", true},
		{"obol_adaptive_operations_total{op=admit,outcome=admitted,resource=o/jobs}", false},
		{"obol_adaptive_operations_total{op=complete,outcome=unknown,resource=o/login}", true},
		{"obol_adaptive_operations_total{op=complete,outcome=expired,resource=o/login}", true},
		{"obol_copies_operations_total{op=reserve,outcome=partial,resource=o/login}", false},
		{"obol_copies_operations_total{op=release,outcome=ok,resource=unconfigured}", true},
		{"obol_adaptive_operations_total{op=admit,outcome=lenient,resource=unconfigured}", true},
	} {
		if _, ok := c[tc.key]; ok != tc.want {
			t.Errorf("%s: present %v, want %v", tc.key, ok, tc.want)
		}
	}
	// The page renders (the expired series join the family the API counts).
	page := string(h.do("GET", "/metrics", "").body)
	if !strings.Contains(page, `obol_adaptive_operations_total{op="complete",outcome="expired",resource="o/login"} 0`) ||
		strings.Count(page, "# TYPE obol_adaptive_operations_total counter") != 1 {
		t.Errorf("/metrics: the adaptive family is not one counter family with the expired series:\n%s", page)
	}
}

// rejectionServer is a Server on the observability config at t0 that logs
// to the returned buffer at LogRejections p.
func rejectionServer(t *testing.T, p float64) (*Server, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	s := New(obsEngine(t), Options{
		Now:           func() time.Time { return t0 },
		Logger:        slog.New(slog.NewJSONHandler(logs, nil)),
		LogRejections: p,
	})
	return s, logs
}

// serveOne serves one request on s without a network, and returns the status.
func serveOne(s *Server, method, uri, body string) int {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetContentType(contentTypeJSON)
	ctx.Request.SetBodyString(body)
	s.Handler(&ctx)
	return ctx.Response.StatusCode()
}

// logLines decodes the JSON log lines of logs whose msg is "rejected".
func logLines(t *testing.T, logs *logBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "rejected" {
			delete(m, "time")
			out = append(out, m)
		}
	}
	return out
}

func TestLogRejections(t *testing.T) {
	s, logs := rejectionServer(t, 1)
	sid := func() string {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI("/v1/sessions")
		s.Handler(&ctx)
		var m map[string]any
		_ = json.Unmarshal(ctx.Response.Body(), &m)
		return m["session"].(string)
	}()
	for _, r := range []struct{ uri, body string }{
		{"/v1/request", `{"resource":"o/gcra","domain":"a"}`},            // granted: no line
		{"/v1/request", `{"resource":"o/gcra","domain":"a"}`},            // rejected
		{"/v1/request", `{"resource":"o/gcra","domain":"a","copies":0}`}, // a peek: no line
		{"/v1/request", `{"resource":"o/gshadow","domain":"s"}`},         // granted
		{"/v1/request", `{"resource":"o/gshadow","domain":"s"}`},         // shadow
		{"/v1/batch", batchJSON(`{"resource":"o/gcra","domain":"b"}`, `{"resource":"o/gcra","domain":"b"}`)},
		{"/v1/reserve", `{"resource":"o/jobs","domain":"j","copies":6,"session":"` + sid + `"}`},
		{"/v1/admit", `{"resource":"o/ashadow"}`},
		{"/v1/admit", `{"resource":"o/ashadow"}`},
	} {
		if st := serveOne(s, "POST", r.uri, r.body); st != 200 {
			t.Fatalf("%s %s: %d", r.uri, r.body, st)
		}
	}
	if st := serveOne(s, "GET", "/v1/check?resource=o/tiers&domain=c&copies=3", ""); st != 429 { // more than the tier: never
		t.Fatalf("check: %d", st)
	}
	want := []map[string]any{
		{"level": "INFO", "msg": "rejected", "resource": "o/gcra", "domain": "a", "kind": "gcra", "retry_after_ms": 1000.0, "shadow": false},
		{"level": "INFO", "msg": "rejected", "resource": "o/gshadow", "domain": "s", "kind": "gcra", "retry_after_ms": 1000.0, "shadow": true},
		{"level": "INFO", "msg": "rejected", "resource": "o/gcra", "domain": "b", "kind": "gcra", "retry_after_ms": 1000.0, "shadow": false},
		{"level": "INFO", "msg": "rejected", "resource": "o/jobs", "domain": "j", "kind": "copies", "shadow": false},
		{"level": "INFO", "msg": "rejected", "resource": "o/ashadow", "kind": "adaptive", "window": 1.0, "shadow": true},
		{"level": "INFO", "msg": "rejected", "resource": "o/tiers", "domain": "c", "kind": "tiers", "retry_after_ms": -1.0, "shadow": false},
	}
	got := logLines(t, logs)
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), logs.String())
	}
	for i := range want {
		if !maps.Equal(got[i], want[i]) {
			t.Errorf("line %d: %v\nwant %v", i, got[i], want[i])
		}
	}
}

// TestLogRejectionsSampled checks the rate: none at 0, and at 0.25 a count
// of 4000 rejections' lines within 10 standard deviations of 1000 (a
// binomial: sd ≈ 27), so that only a broken sampler fails.
func TestLogRejectionsSampled(t *testing.T) {
	for _, tc := range []struct {
		p      float64
		lo, hi int
	}{{0, 0, 0}, {0.25, 730, 1270}} {
		t.Run(fmt.Sprint(tc.p), func(t *testing.T) {
			s, logs := rejectionServer(t, tc.p)
			serveOne(s, "POST", "/v1/request", `{"resource":"o/gcra","domain":"a"}`) // the one grant
			for range 4000 {
				serveOne(s, "POST", "/v1/request", `{"resource":"o/gcra","domain":"a"}`)
			}
			if n := len(logLines(t, logs)); n < tc.lo || n > tc.hi {
				t.Errorf("LogRejections %v: %d lines for 4000 rejections, want %d..%d", tc.p, n, tc.lo, tc.hi)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		p    float64
		want string // "" when valid
	}{
		{0, ""}, {0.01, ""}, {1, ""},
		{-0.1, "LogRejections: must be a fraction in [0, 1], got -0.1"},
		{1.5, "LogRejections: must be a fraction in [0, 1], got 1.5"},
		{math.NaN(), "got NaN"},
		{math.Inf(1), "got +Inf"},
	} {
		err := Options{LogRejections: tc.p}.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.p, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.p, err, tc.want)
			continue
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New with LogRejections %v did not panic", tc.p)
				}
			}()
			New(obsEngine(t), Options{LogRejections: tc.p, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		}()
	}
}
