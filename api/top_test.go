package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
)

// topOf asks GET /v1/top with query q and decodes the 200 reply.
func topOf(h *harness, q string) topReply {
	h.t.Helper()
	r := h.do("GET", "/v1/top?"+q, "")
	if r.status != 200 {
		h.t.Fatalf("/v1/top?%s: %d %s", q, r.status, r.body)
	}
	var tr topReply
	d := json.NewDecoder(strings.NewReader(string(r.body)))
	d.DisallowUnknownFields()
	if err := d.Decode(&tr); err != nil {
		h.t.Fatalf("/v1/top?%s: %v: %s", q, err, r.body)
	}
	return tr
}

// domains renders a reply's domains as "domain=count/error_bound".
func domains(tr topReply) string {
	var parts []string
	for _, d := range tr.Domains {
		parts = append(parts, fmt.Sprintf("%s=%d/%d", d.Domain, d.Count, d.ErrorBound))
	}
	return strings.Join(parts, " ")
}

// TestTop steps the clock over fixed instants and checks who /v1/top
// reports, by rejections and by grants, and over which window.
func TestTop(t *testing.T) {
	h := newObsHarness(t)
	req := func(resource, domain string, n int) {
		for range n {
			h.ok("/v1/request", `{"resource":"`+resource+`","domain":"`+domain+`"}`)
		}
	}
	// t0: o/gcra grants each domain once a second (burst 1): heavy is
	// granted 1 and rejected 9, mid 1 and 4, light 1 and 0.
	req("o/gcra", "heavy", 10)
	req("o/gcra", "mid", 5)
	req("o/gcra", "light", 1)
	h.ok("/v1/request", `{"resource":"o/gcra","domain":"peeker","copies":0}`) // a peek: not counted
	h.batch(false, batchJSON(`{"resource":"o/gcra","domain":"batched"}`, `{"resource":"o/gcra","domain":"batched"}`), nil)
	h.do("GET", "/v1/check?resource=o/gcra&domain=checked", "")
	h.do("GET", "/v1/check?resource=o/gcra&domain=checked", "")
	req("o/gshadow", "shadowed", 3) // granted 1, then 2 shadow grants: limited
	req("open/x", "unconfigured", 3)

	tr := topOf(h, "resource=o/gcra")
	if tr.Resource != "o/gcra" || tr.By != "rejected" || tr.WindowMs != 0 || tr.Total != 15 {
		t.Errorf("default query: %+v", tr)
	}
	if got, want := domains(tr), "heavy=9/0 mid=4/0 batched=1/0 checked=1/0"; got != want {
		t.Errorf("rejected: %s, want %s", got, want)
	}
	if got, want := domains(topOf(h, "resource=o/gcra&by=granted&n=3")), "batched=1/0 checked=1/0 heavy=1/0"; got != want {
		t.Errorf("granted, n=3: %s, want %s", got, want)
	}
	if got, want := domains(topOf(h, "resource=o/gshadow&by=rejected")), "shadowed=2/0"; got != want {
		t.Errorf("shadow: %s, want %s", got, want)
	}

	// t0+25 s: mid is rejected twice more; the window is the agent's 25 s.
	h.clock.set(t0.Add(25 * time.Second))
	req("o/gcra", "mid", 3)
	tr = topOf(h, "resource=o/gcra&n=2")
	if got, want := domains(tr), "heavy=9/0 mid=6/0"; got != want || tr.WindowMs != 25000 || tr.Total != 17 {
		t.Errorf("at 25 s: %s (window %d ms, total %d), want %s (25000 ms, 17)", got, tr.WindowMs, tr.Total, want)
	}

	// t0+61 s: the slot of t0 has left the window, which is now the slot of
	// 60–70 s and the five before it: [10 s, 61 s].
	h.clock.set(t0.Add(61 * time.Second))
	tr = topOf(h, "resource=o/gcra")
	if got, want := domains(tr), "mid=2/0"; got != want || tr.WindowMs != 51000 || tr.Total != 2 {
		t.Errorf("at 61 s: %s (window %d ms, total %d), want %s (51000 ms, 2)", got, tr.WindowMs, tr.Total, want)
	}
	// t0+95 s: nothing left.
	h.clock.set(t0.Add(95 * time.Second))
	if tr := topOf(h, "resource=o/gcra"); len(tr.Domains) != 0 || tr.Total != 0 || tr.WindowMs != 55000 {
		t.Errorf("at 95 s: %+v", tr)
	}
	// The reply's exact form.
	if r := h.do("GET", "/v1/top?resource=o/tiers&by=granted", ""); string(r.body) != `{"resource":"o/tiers","by":"granted","window_ms":55000,"total":0,"domains":[]}` {
		t.Errorf("empty reply: %s", r.body)
	}
}

// TestTopCopies checks that reserves are counted by domain: a partial grant
// as a grant, a rejection as one.
func TestTopCopies(t *testing.T) {
	h := newObsHarness(t)
	sess := str(t, h.ok("/v1/sessions", `{}`), "session")
	for _, body := range []string{
		`{"resource":"o/jobs","domain":"big","copies":4}`,
		`{"resource":"o/jobs","domain":"big","copies":4,"min_copies":1}`, // 1 of 4: partial
		`{"resource":"o/jobs","domain":"big","copies":1}`,                // rejected
		`{"resource":"o/jobs","domain":"big","copies":0}`,                // a peek
	} {
		h.ok("/v1/reserve", strings.TrimSuffix(body, "}")+`,"session":"`+sess+`"}`)
	}
	if got := domains(topOf(h, "resource=o/jobs&by=granted")); got != "big=2/0" {
		t.Errorf("granted: %s", got)
	}
	if got := domains(topOf(h, "resource=o/jobs")); got != "big=1/0" {
		t.Errorf("rejected: %s", got)
	}
}

func TestTopErrors(t *testing.T) {
	h := newObsHarness(t)
	for _, tc := range []struct {
		query  string
		status int
		code   string
		msg    string // a part of the message
	}{
		{query: "", status: 400, code: codeBadRequest, msg: "resource: required query parameter is missing"},
		{query: "by=granted", status: 400, code: codeBadRequest, msg: "resource: required"},
		{query: "resource=o/gcra&by=allowed", status: 400, code: codeBadRequest, msg: `by: must be "rejected" or "granted", got "allowed"`},
		{query: "resource=o/gcra&n=0", status: 400, code: codeBadRequest, msg: `n: must be an integer in [1, 100], got "0"`},
		{query: "resource=o/gcra&n=101", status: 400, code: codeBadRequest, msg: `n: must be an integer in [1, 100], got "101"`},
		{query: "resource=o/gcra&n=ten", status: 400, code: codeBadRequest, msg: `got "ten"`},
		{query: "resource=o/gcra&n=", status: 400, code: codeBadRequest, msg: `got ""`},
		{query: "resource=o/gcra&domain=a", status: 400, code: codeBadRequest, msg: `domain: unknown query parameter; expected one of resource, by, n`},
		{query: "resource=o/gcra&resource=o/tiers", status: 400, code: codeBadRequest, msg: "resource: given twice"},
		{query: "resource=o/gcra&by=granted&by=rejected", status: 400, code: codeBadRequest, msg: "by: given twice"},
		{query: "resource=", status: 400, code: codeBadRequest, msg: "resource"},
		{query: "resource=nope/x", status: 404, code: codeUnknownResource, msg: `"nope/x" has no config`},
		{query: "resource=open/x", status: 404, code: codeUnknownResource, msg: `"open/x" has no config (/v1/top counts configured resources only)`},
		{query: "resource=o/login", status: 409, code: codeWrongKind, msg: `"o/login" is an adaptive resource`},
	} {
		r := h.do("GET", "/v1/top?"+tc.query, "")
		code, msg := errorReply(t, r.body)
		if r.status != tc.status || code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("?%s: %d %s %q, want %d %s with %q", tc.query, r.status, code, msg, tc.status, tc.code, tc.msg)
		}
	}
}

// TestTopReload checks that a reload keeps the windows of the resources it
// keeps and starts those of a resource whose kind changed.
func TestTopReload(t *testing.T) {
	h := newObsHarness(t)
	for range 3 {
		h.ok("/v1/request", `{"resource":"o/gcra","domain":"a"}`)
		h.ok("/v1/request", `{"resource":"o/tiers","domain":"a","copies":3}`)
	}
	cfg := strings.Replace(obsConfig, `o/tiers: {kind: tiers, tiers: "2,1,1,0"}`, `o/tiers: {kind: gcra, burst: 1, count: 1, period: 1s}`, 1)
	parsed, err := config.Parse([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := h.srv.Engine().Reload(parsed)
	h.srv.SetEngine(n)
	if got := domains(topOf(h, "resource=o/gcra")); got != "a=2/0" {
		t.Errorf("kept: %s", got)
	}
	if tr := topOf(h, "resource=o/tiers"); len(tr.Domains) != 0 || tr.Total != 0 {
		t.Errorf("a changed kind starts again: %+v", tr)
	}
}

// FuzzReadTopQuery checks that any query is either a client error naming
// what is wrong, or a query within the documented bounds.
func FuzzReadTopQuery(f *testing.F) {
	for _, q := range []string{"resource=a/b", "resource=a/b&by=granted&n=100", "n=0&by=x", "resource=%ff&n=7", "resource=a&resource=b", "by=rejected&n=99999999999999999999"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, query string) {
		var args fasthttp.Args
		args.Parse(query)
		q, err := readTopQuery(&args)
		if err != nil {
			if _, code, msg, ok := classify(err); !ok || code != codeBadRequest || msg == "" {
				t.Fatalf("%q: error %v is not a bad_request", query, err)
			}
			return
		}
		if len(q.resource) == 0 || len(q.resource) > maxName || !utf8.Valid(q.resource) {
			t.Fatalf("%q: resource %q accepted", query, q.resource)
		}
		if (q.by != "rejected" && q.by != "granted") || q.n < 1 || q.n > topMaxN {
			t.Fatalf("%q: by %q, n %d accepted", query, q.by, q.n)
		}
	})
}
