package api

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"github.com/vmihailenco/msgpack/v5"
)

// TestDashboardFiles: GET / is the page, /ui/{name} its files with their
// content types and the security headers; any other name is 404.
func TestDashboardFiles(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		path, ct string
		status   int
		contains string
	}{
		{path: "/", ct: "text/html; charset=utf-8", status: 200, contains: "<title>obol dashboard</title>"},
		{path: "/ui/app.js", ct: "text/javascript; charset=utf-8", status: 200, contains: "obol.view"},
		{path: "/ui/style.css", ct: "text/css; charset=utf-8", status: 200, contains: "prefers-color-scheme"},
		{path: "/ui/favicon.svg", ct: "image/svg+xml", status: 200, contains: "<svg"},
		{path: "/ui/nope.js", ct: "application/json", status: 404, contains: `no dashboard file \"nope.js\"`},
		{path: "/ui/..%2fassets.go", ct: "application/json", status: 404, contains: "no endpoint GET /assets.go"}, // the path is cleaned first
		{path: "/ui/", ct: "application/json", status: 404, contains: "no endpoint"},
	} {
		r := h.do("GET", tc.path, "")
		if r.status != tc.status || r.header.Get("Content-Type") != tc.ct || !strings.Contains(string(r.body), tc.contains) {
			t.Errorf("GET %s: %d %q, want %d %q containing %q; body %.200s", tc.path, r.status, r.header.Get("Content-Type"), tc.status, tc.ct, tc.contains, r.body)
		}
		if tc.status == 200 && !strings.Contains(r.header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, r.header.Get("Content-Security-Policy"))
		}
	}
	if r := h.do("POST", "/", ""); r.status != 405 {
		t.Errorf("POST /: %d, want 405", r.status)
	}
}

// TestDashboardWithoutToken: the page and its files are served without the
// token on a public listener (a browser cannot add it to a navigation);
// the API the page calls still asks for it.
func TestDashboardWithoutToken(t *testing.T) {
	h := newHarness(t)
	h.srv.authToken = []byte("s3cret-token")
	public := &net.TCPAddr{IP: net.IPv4(203, 0, 113, 9), Port: 7070}
	for path, want := range map[string]int{"/": 200, "/ui/app.js": 200, "/v1/config": 401, "/metrics": 401, "/ui/nope.js": 404} {
		if got := serveVia(h.srv, public, "GET", path, "").StatusCode(); got != want {
			t.Errorf("GET %s without the token on a public listener: %d, want %d", path, got, want)
		}
	}
	if got := serveVia(h.srv, public, "POST", "/", "").StatusCode(); got != 401 {
		t.Errorf("POST / without the token: %d, want 401 (only GETs of the page are exempt)", got)
	}
}

// TestSimulateTrace: ?trace=true adds each key's state after each request;
// without it the reply has no trace; a bad value is 400 naming it.
func TestSimulateTrace(t *testing.T) {
	h := newHarness(t)
	body := `{"resource":{"kind":"tiers","tiers":"2,1,1,0,3,5,5,5"},"requests":[` +
		`{"at_ms":0,"domain":"a"},{"at_ms":0,"domain":"a"},{"at_ms":0,"domain":"a"},{"at_ms":1000,"domain":"b"},{"at_ms":1500,"domain":"a"}]}`
	var rep struct {
		Decisions []map[string]any `json:"decisions"`
		Trace     []struct {
			Tiers []struct {
				State string `json:"state"`
				Hits  int    `json:"hits"`
			} `json:"tiers"`
		} `json:"trace"`
	}
	r := h.post("/v1/simulate?trace=true", body)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Trace) != len(rep.Decisions) {
		t.Fatalf("%d trace items for %d decisions: %s", len(rep.Trace), len(rep.Decisions), r.body)
	}
	// The first three fill tier 1 (limit 2), then climb to tier 2.
	for i, w := range [][2]int{{1, 0}, {2, 0}, {2, 1}, {1, 0}} {
		got := rep.Trace[i].Tiers
		if len(got) != 2 || got[0].Hits != w[0] || got[1].Hits != w[1] {
			t.Errorf("trace[%d] = %+v, want hits %v", i, got, w)
		}
	}
	// Each item agrees with its decision: the tier granted from holds the
	// hits the decision reports.
	for i, d := range rep.Decisions {
		tier, hits := int(d["tier"].(float64)), int(d["tier_hits"].(float64))
		if got := rep.Trace[i].Tiers[tier-1]; got.Hits != hits || got.State != "active" {
			t.Errorf("trace[%d] tier %d = %+v, but the decision says tier_hits %d", i, tier, got, hits)
		}
	}
	if rep.Trace[2].Tiers[1].State != "active" {
		t.Errorf("trace[2] tier 2 state %q, want active", rep.Trace[2].Tiers[1].State)
	}

	if r := h.post("/v1/simulate", body); r.status != 200 || strings.Contains(string(r.body), `"trace"`) {
		t.Errorf("without ?trace: %d %s", r.status, r.body)
	}
	gcra := `{"resource":{"kind":"gcra","burst":2,"count":1,"period":"1s"},"requests":[{"at_ms":0,"domain":"a"},{"at_ms":10,"domain":"a"},{"at_ms":5000,"domain":"a"}]}`
	if r := h.post("/v1/simulate?trace=true", gcra); !strings.Contains(string(r.body), `"trace":[{"tat_ms":1000},{"tat_ms":2000},{"tat_ms":6000}]`) {
		t.Errorf("gcra trace: %d %s", r.status, r.body)
	}
	for q, msg := range map[string]string{
		"trace=yes":              `trace: must be true or false, got \"yes\"`,
		"tracing=true":           "tracing: unknown query parameter; expected trace",
		"trace=true&trace=false": "trace: given twice",
	} {
		if r := h.post("/v1/simulate?"+q, gcra); r.status != 400 || !strings.Contains(string(r.body), msg) {
			t.Errorf("?%s: %d %s, want 400 %s", q, r.status, r.body, msg)
		}
	}
}

// TestSimulateTraceMsgpack: the trace is written in MessagePack too.
func TestSimulateTraceMsgpack(t *testing.T) {
	h := newHarness(t)
	gcra := `{"resource":{"kind":"gcra","burst":2,"count":1,"period":"1s"},"requests":[{"at_ms":0,"domain":"a"}]}`
	r := h.do("POST", "/v1/simulate?trace=true", gcra, "Accept: application/msgpack")
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	var m struct {
		Decisions []map[string]any `msgpack:"decisions"`
		Trace     []struct {
			TATMs int64 `msgpack:"tat_ms"`
		} `msgpack:"trace"`
	}
	if err := msgpack.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("%v: %x", err, r.body)
	}
	if len(m.Decisions) != 1 || len(m.Trace) != 1 || m.Trace[0].TATMs != 1000 {
		t.Errorf("reply %+v, want one decision and a trace of tat_ms 1000", m)
	}
}

// FuzzTraceParam: any query is read without a panic, and only
// trace=true alone asks for the trace.
func FuzzTraceParam(f *testing.F) {
	for _, q := range []string{"", "trace=true", "trace=false", "trace=yes", "x=1", "trace=true&trace=true", "trace", "%zz"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI("/v1/simulate?" + q)
		trace, err := traceParam(&ctx)
		if trace && err != nil {
			t.Fatalf("%q: trace and an error %v", q, err)
		}
		if trace && ctx.QueryArgs().Len() != 1 {
			t.Fatalf("%q: trace with %d parameters", q, ctx.QueryArgs().Len())
		}
	})
}
