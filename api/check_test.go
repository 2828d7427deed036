package api

import (
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// checkConfig is the config of the /v1/check tests: one resource per
// situation the RateLimit fields must describe.
const checkConfig = `
namespaces:
  open: {allow_unconfigured: true}
resources:
  c/tiers:
    kind: tiers
    tiers: "5,1,1,0,50,5,5,15"
    hard_limit: 100
    global_limit: 1000
    domains:
      vip: {tiers: "20,1,1,0", hard_limit: 30}
  c/hard: {kind: tiers, tiers: "50,1,1,0", hard_limit: 3}
  c/global: {kind: tiers, tiers: "50,1,1,0", global_limit: 2}
  c/zero: {kind: tiers, tiers: "5,1,1,0", hard_limit: 0}
  c/none: {kind: tiers, tiers: []}
  c/cool: {kind: tiers, tiers: "50,15,15,30"}
  c/tie: {kind: tiers, tiers: [{limit: 2, window: 500ms, active: 1s}], global_limit: 2}
  c/gcra:
    kind: gcra
    burst: 20
    count: 20
    period: 1s
    domains:
      big: {burst: 40, count: 20, period: 1s}
  c/copies: {kind: copies, domain_limit: 1}
`

// newCheckHarness is newHarness on checkConfig with opts (its clock and
// logger are the harness's).
func newCheckHarness(t testing.TB, opts Options) *harness {
	t.Helper()
	cfg, err := config.Parse([]byte(checkConfig))
	if err != nil {
		t.Fatalf("check config: %v", err)
	}
	h := &harness{t: t, clock: &clock{t: t0}, logs: &logBuffer{}}
	opts.Now = h.clock.now
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	h.srv = New(local.New(cfg), opts)
	return h.serve()
}

// spend is a /v1/request made at an instant, ms after t0.
type spend struct {
	at     int
	res    string
	domain string
	copies int
}

// spendAll makes the requests in order, each at its instant, and requires
// each to be granted in full.
func (h *harness) spendAll(ss []spend) {
	h.t.Helper()
	for _, s := range ss {
		h.clock.set(t0.Add(time.Duration(s.at) * time.Millisecond))
		m := h.ok("/v1/request", `{"resource":"`+s.res+`","domain":"`+s.domain+`","copies":`+strconv.Itoa(s.copies)+`}`)
		if num(h.t, m, "granted") != int64(s.copies) {
			h.t.Fatalf("spending %+v: %v", s, m)
		}
	}
}

// rateFields parses a reply's RateLimit-Policy and RateLimit fields with
// the strict parser and checks what every reply that has them must hold:
// a non-empty policy list of strings with q and w (w ≥ 1) and unique
// names; one RateLimit item, a string naming a listed policy, with r (and
// t, when present) non-negative and r at most that policy's q. It returns
// the policies by name and the RateLimit item.
func rateFields(t testing.TB, r reply) (map[string]sfItem, sfItem) {
	t.Helper()
	policies, err := parseSFList(r.header.Get("RateLimit-Policy"))
	if err != nil || len(policies) == 0 {
		t.Fatalf("RateLimit-Policy %q: %v (want a non-empty list)", r.header.Get("RateLimit-Policy"), err)
	}
	byName := map[string]sfItem{}
	for _, p := range policies {
		q, okQ := p.param("q")
		w, okW := p.param("w")
		if p.token || !okQ || !okW || q < 0 || w < 1 || p.keys() != "q,w" {
			t.Errorf("policy item %+v: want a string with q ≥ 0 and w ≥ 1, only", p)
		}
		if _, dup := byName[p.value]; dup {
			t.Errorf("policy %q listed twice in %q", p.value, r.header.Get("RateLimit-Policy"))
		}
		byName[p.value] = p
	}
	items, err := parseSFList(r.header.Get("RateLimit"))
	if err != nil || len(items) != 1 {
		t.Fatalf("RateLimit %q: %v (want one item)", r.header.Get("RateLimit"), err)
	}
	it := items[0]
	pol, listed := byName[it.value]
	rv, okR := it.param("r")
	tv, okT := it.param("t")
	q, _ := pol.param("q")
	switch {
	case it.token || !listed:
		t.Errorf("RateLimit %q names no listed policy (%q)", r.header.Get("RateLimit"), r.header.Get("RateLimit-Policy"))
	case !okR || rv < 0 || rv > q:
		t.Errorf("RateLimit %q: r must be in [0, q=%d]", r.header.Get("RateLimit"), q)
	case okT && tv < 0, it.keys() != "r,t" && it.keys() != "r":
		t.Errorf("RateLimit %q: want r and an optional t ≥ 0, only", r.header.Get("RateLimit"))
	}
	return byName, it
}

// TestCheckRateLimitValues checks the RateLimit fields, and the status and
// Retry-After beside them, on fixed instants, one situation per case.
func TestCheckRateLimitValues(t *testing.T) {
	const (
		tiersPolicy = `"t1";q=5;w=1, "t2";q=50;w=5, "hard";q=100;w=1, "global";q=1000;w=1`
		gcraPolicy  = `"gcra";q=20;w=1`
	)
	for _, tc := range []struct {
		name      string
		spend     []spend
		at        int    // ms after t0
		query     string // after /v1/check?
		status    int
		policy    string
		rateLimit string
		retry     string // Retry-After; "" = none
	}{
		{name: "fresh domain: tier 1", query: "resource=c/tiers&domain=d&copies=0",
			status: 204, policy: tiersPolicy, rateLimit: `"t1";r=5;t=1`},
		{name: "in tier 1", spend: []spend{{0, "c/tiers", "d", 1}},
			at: 400, query: "resource=c/tiers&domain=d",
			status: 204, policy: tiersPolicy, rateLimit: `"t1";r=3;t=1`},
		{name: "after a burst: tier 2 until its cooldown ends",
			spend: []spend{{0, "c/tiers", "d", 6}}, at: 1000, query: "resource=c/tiers&domain=d&copies=0",
			status: 204, policy: tiersPolicy, rateLimit: `"t2";r=49;t=19`},
		{name: "tier 2 cooling down: tier 1 afresh",
			spend: []spend{{0, "c/tiers", "d", 6}}, at: 6000, query: "resource=c/tiers&domain=d&copies=0",
			status: 204, policy: tiersPolicy, rateLimit: `"t1";r=5;t=1`},
		{name: "both tiers spent: t is cut to Retry-After",
			spend: []spend{{0, "c/tiers", "d", 55}}, at: 1000, query: "resource=c/tiers&domain=d",
			status: 429, policy: tiersPolicy, rateLimit: `"t2";r=0;t=4`, retry: "4"},
		{name: "the override's policies",
			query:  "resource=c/tiers&domain=vip&copies=0",
			status: 204, policy: `"t1";q=20;w=1, "hard";q=30;w=1, "global";q=1000;w=1`, rateLimit: `"t1";r=20;t=1`},
		{name: "hard limit binding",
			spend: []spend{{0, "c/hard", "d", 3}}, at: 200, query: "resource=c/hard&domain=d",
			status: 429, policy: `"t1";q=50;w=1, "hard";q=3;w=1`, rateLimit: `"hard";r=0;t=1`, retry: "1"},
		{name: "global limit binding: another domain's hit leaves first",
			spend: []spend{{0, "c/global", "a", 1}, {300, "c/global", "b", 1}}, at: 400, query: "resource=c/global&domain=c",
			status: 429, policy: `"t1";q=50;w=1, "global";q=2;w=1`, rateLimit: `"global";r=0;t=1`, retry: "1"},
		{name: "a limit of 0: listed, and no t nor Retry-After",
			query:  "resource=c/zero&domain=d",
			status: 429, policy: `"t1";q=5;w=1, "hard";q=0;w=1`, rateLimit: `"hard";r=0`},
		{name: "no tier: the fake tier 0",
			query:  "resource=c/none&domain=d",
			status: 429, policy: `"t0";q=0;w=1`, rateLimit: `"t0";r=0`},
		{name: "every tier cooling down",
			spend: []spend{{0, "c/cool", "d", 50}}, at: 20_000, query: "resource=c/cool&domain=d",
			status: 429, policy: `"t1";q=50;w=15`, rateLimit: `"t1";r=0;t=25`, retry: "25"},
		{name: "a tie on r goes to the longer window",
			spend: []spend{{0, "c/tie", "d", 1}}, at: 0, query: "resource=c/tie&domain=d&copies=0",
			status: 204, policy: `"t1";q=2;w=1, "global";q=2;w=1`, rateLimit: `"global";r=1;t=1`},
		{name: "gcra full", query: "resource=c/gcra&domain=d&copies=0",
			status: 204, policy: gcraPolicy, rateLimit: `"gcra";r=20;t=1`},
		{name: "gcra part spent", spend: []spend{{0, "c/gcra", "d", 5}},
			at: 10, query: "resource=c/gcra&domain=d",
			status: 204, policy: gcraPolicy, rateLimit: `"gcra";r=14;t=1`},
		{name: "gcra empty", spend: []spend{{0, "c/gcra", "d", 20}},
			at: 30, query: "resource=c/gcra&domain=d",
			status: 429, policy: gcraPolicy, rateLimit: `"gcra";r=0;t=1`, retry: "1"},
		{name: "gcra override: w is the time to refill the burst",
			query:  "resource=c/gcra&domain=big&copies=0",
			status: 204, policy: `"gcra";q=40;w=2`, rateLimit: `"gcra";r=40;t=1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newCheckHarness(t, Options{})
			h.spendAll(tc.spend)
			h.clock.set(t0.Add(time.Duration(tc.at) * time.Millisecond))
			r := h.do("GET", "/v1/check?"+tc.query, "")
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			got := [3]string{r.header.Get("RateLimit-Policy"), r.header.Get("RateLimit"), r.header.Get("Retry-After")}
			if want := [3]string{tc.policy, tc.rateLimit, tc.retry}; got != want {
				t.Errorf("RateLimit-Policy, RateLimit, Retry-After =\n%q\nwant\n%q", got, want)
			}
			rateFields(t, r)
		})
	}
}

// TestCheckFieldsOverTime walks a domain of c/tiers through bursts,
// rejections and cooldowns, 100 ms apart, with another domain's traffic
// beside it, and checks every reply: the fields parse strictly, the policy
// list never changes, r is at most its policy's q, and on a rejection t is
// never past Retry-After (which the draft requires) and a finite wait
// always has both.
func TestCheckFieldsOverTime(t *testing.T) {
	h := newCheckHarness(t, Options{})
	var policy string
	rejected, granted := 0, 0
	for step := range 600 {
		h.clock.set(t0.Add(time.Duration(step) * 100 * time.Millisecond))
		copies := []int{1, 7, 3, 0, 12}[step%5]
		if step%3 == 0 {
			h.do("GET", "/v1/check?resource=c/tiers&domain=other&copies=9", "")
		}
		r := h.do("GET", "/v1/check?resource=c/tiers&domain=d&copies="+strconv.Itoa(copies), "")
		if r.status != 204 && r.status != 429 {
			t.Fatalf("step %d: status %d: %s", step, r.status, r.body)
		}
		if policy == "" {
			policy = r.header.Get("RateLimit-Policy")
		}
		if got := r.header.Get("RateLimit-Policy"); got != policy {
			t.Fatalf("step %d: RateLimit-Policy %q, was %q", step, got, policy)
		}
		_, it := rateFields(t, r)
		if r.status == 204 {
			granted++
			if r.header.Get("Retry-After") != "" {
				t.Errorf("step %d: Retry-After on a grant", step)
			}
			continue
		}
		rejected++
		m := decodeObject(t, r.body)
		ra := r.header.Get("Retry-After")
		tv, hasT := it.param("t")
		switch wait := num(t, m, "retry_after_ms"); {
		case wait < 0 && ra != "":
			t.Errorf("step %d: Retry-After %q for a request no wait admits", step, ra)
		case wait >= 0 && (ra == "" || !hasT):
			t.Errorf("step %d: a wait of %d ms, Retry-After %q, RateLimit %q: want both", step, wait, ra, r.header.Get("RateLimit"))
		case wait >= 0:
			sec, _ := strconv.ParseInt(ra, 10, 64)
			if tv > sec || sec != max(1, (wait+999)/1000) {
				t.Errorf("step %d: t=%d, Retry-After %s, retry_after_ms %d", step, tv, ra, wait)
			}
		}
	}
	if rejected == 0 || granted == 0 {
		t.Fatalf("the walk saw %d grants and %d rejections: it does not exercise both", granted, rejected)
	}
}

func TestCheckLenientAndOtherKinds(t *testing.T) {
	h := newCheckHarness(t, Options{})
	r := h.do("GET", "/v1/check?resource=open/x&domain=d&headers=both", "")
	if r.status != 204 {
		t.Fatalf("lenient: %d %s", r.status, r.body)
	}
	for _, k := range []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if v := r.header.Get(k); v != "" {
			t.Errorf("lenient grant: %s %q, want none", k, v)
		}
	}
	if r := h.do("GET", "/v1/check?resource=c/copies&domain=d", ""); r.status != 409 {
		t.Errorf("check on a copies resource: %d %s, want 409", r.status, r.body)
	}
}

func TestCheckDenyStatus(t *testing.T) {
	h := newCheckHarness(t, Options{})
	h.spendAll([]spend{{0, "c/gcra", "d", 20}})
	for _, tc := range []struct {
		name    string
		query   string
		headers []string
		status  int
	}{
		{name: "default", status: 429},
		{name: "query", query: "&deny_status=403", status: 403},
		{name: "header", headers: []string{"Obol-Deny-Status: 401"}, status: 401},
		{name: "query wins over header", query: "&deny_status=403", headers: []string{"Obol-Deny-Status: 503"}, status: 403},
		{name: "lowest", query: "&deny_status=400", status: 400},
		{name: "highest", query: "&deny_status=599", status: 599},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("GET", "/v1/check?resource=c/gcra&domain=d"+tc.query, "", tc.headers...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			got := [3]string{r.header.Get("RateLimit-Policy"), r.header.Get("RateLimit"), r.header.Get("Retry-After")}
			if want := [3]string{`"gcra";q=20;w=1`, `"gcra";r=0;t=1`, "1"}; got != want {
				t.Errorf("RateLimit-Policy, RateLimit, Retry-After = %q, want %q", got, want)
			}
			if m := decodeObject(t, r.body); num(t, m, "granted") != 0 || num(t, m, "retry_after_ms") != 50 {
				t.Errorf("body %v, want the decision", m)
			}
		})
	}
	// A grant is a 204 whatever the deny status, with the same fields.
	r := h.do("GET", "/v1/check?resource=c/gcra&domain=e&deny_status=403", "")
	if r.status != 204 || r.header.Get("RateLimit") != `"gcra";r=19;t=1` || r.header.Get("Retry-After") != "" {
		t.Errorf("grant with deny_status: %d %v", r.status, r.header)
	}
}

func TestCheckBadOptions(t *testing.T) {
	h := newCheckHarness(t, Options{})
	for _, tc := range []struct {
		query   string
		headers []string
		msg     string
	}{
		{query: "&deny_status=200", msg: `deny_status: must be an HTTP status in [400, 599] (e.g. 403 for nginx auth_request), got "200"`},
		{query: "&deny_status=600", msg: `got "600"`},
		{query: "&deny_status=399", msg: `got "399"`},
		{query: "&deny_status=4o3", msg: `got "4o3"`},
		{query: "&deny_status=", msg: `got ""`},
		{query: "&deny_status=-403", msg: `got "-403"`},
		{query: "&deny_status=403&deny_status=403", msg: "deny_status: given twice"},
		{headers: []string{"Obol-Deny-Status: 302"}, msg: `Obol-Deny-Status: must be an HTTP status in [400, 599] (e.g. 403 for nginx auth_request), got "302"`},
		{query: "&headers=draft10", msg: `headers: must be "draft11", "draft03" or "both", got "draft10"`},
		{query: "&headers=BOTH", msg: `got "BOTH"`},
		{query: "&headers=both&headers=both", msg: "headers: given twice"},
		{headers: []string{"Obol-RateLimit-Headers: x"}, msg: `Obol-RateLimit-Headers: must be "draft11", "draft03" or "both", got "x"`},
		{query: "&deny=403", msg: `deny: unknown query parameter; expected one of resource, domain, copies, deny_status, headers`},
		{query: "&copies=1&copies=1", msg: "copies: given twice"},
	} {
		r := h.do("GET", "/v1/check?resource=c/gcra&domain=d"+tc.query, "", tc.headers...)
		if r.status != 400 {
			t.Errorf("%s %v: status %d, want 400: %s", tc.query, tc.headers, r.status, r.body)
			continue
		}
		if code, msg := errorReply(t, r.body); code != "bad_request" || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s %v: %s %q, want bad_request containing %q", tc.query, tc.headers, code, msg, tc.msg)
		}
	}
	// None of them spent anything.
	if r := h.do("GET", "/v1/check?resource=c/gcra&domain=d&copies=0", ""); r.header.Get("RateLimit") != `"gcra";r=20;t=1` {
		t.Errorf("after the refused checks: RateLimit %q, want a full bucket", r.header.Get("RateLimit"))
	}
}

func TestCheckHeaderForms(t *testing.T) {
	h := newCheckHarness(t, Options{})
	h.spendAll([]spend{{0, "c/tiers", "d", 2}, {0, "c/zero", "d", 0}})
	const (
		limit03 = `5, 5;w=1;name="t1", 50;w=5;name="t2", 100;w=1;name="hard", 1000;w=1;name="global"`
		policy  = `"t1";q=5;w=1, "t2";q=50;w=5, "hard";q=100;w=1, "global";q=1000;w=1`
	)
	for _, tc := range []struct {
		name    string
		query   string
		headers []string
		want    [5]string // RateLimit-Policy, RateLimit, X-RateLimit-Limit, -Remaining, -Reset
	}{
		{name: "default draft11", query: "resource=c/tiers&domain=d&copies=0",
			want: [5]string{policy, `"t1";r=3;t=1`}},
		{name: "draft03 by query", query: "resource=c/tiers&domain=d&copies=0&headers=draft03",
			want: [5]string{2: limit03, 3: "3", 4: "1"}},
		{name: "draft03 by header", query: "resource=c/tiers&domain=d&copies=0", headers: []string{"Obol-RateLimit-Headers: draft03"},
			want: [5]string{2: limit03, 3: "3", 4: "1"}},
		{name: "query wins over header", query: "resource=c/tiers&domain=d&copies=0&headers=draft11", headers: []string{"Obol-RateLimit-Headers: draft03"},
			want: [5]string{policy, `"t1";r=3;t=1`}},
		{name: "both", query: "resource=c/tiers&domain=d&copies=0&headers=both",
			want: [5]string{policy, `"t1";r=3;t=1`, limit03, "3", "1"}},
		{name: "draft03 of a limit of 0: no reset", query: "resource=c/zero&domain=d&headers=both",
			want: [5]string{`"t1";q=5;w=1, "hard";q=0;w=1`, `"hard";r=0`, `0, 5;w=1;name="t1", 0;w=1;name="hard"`, "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("GET", "/v1/check?"+tc.query, "", tc.headers...)
			var got [5]string
			for i, k := range []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
				got[i] = r.header.Get(k)
			}
			if got != tc.want {
				t.Errorf("fields\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestCheckDomainSources(t *testing.T) {
	h := newCheckHarness(t, Options{CheckDomainHeader: "X-Forwarded-For"})
	// Each check spends one token of c/gcra for the domain it resolves to;
	// a peek by query then shows whose bucket it was.
	for _, tc := range []struct {
		name    string
		query   string
		headers []string
		domain  string
	}{
		{name: "query wins", query: "&domain=q", headers: []string{"Obol-Domain: h", "X-Forwarded-For: 10.0.0.1"}, domain: "q"},
		{name: "Obol-Domain over the configured header", headers: []string{"Obol-Domain: h", "X-Forwarded-For: 10.0.0.1"}, domain: "h"},
		{name: "the first of a list", headers: []string{"X-Forwarded-For: 10.0.0.2, 10.0.0.9, 10.0.0.8"}, domain: "10.0.0.2"},
		{name: "trimmed", headers: []string{"X-Forwarded-For: \t 10.0.0.3 \t,10.0.0.9"}, domain: "10.0.0.3"},
		{name: "a single element", headers: []string{"X-Forwarded-For: 2001:db8::1"}, domain: "2001:db8::1"},
		{name: "header name in any case", headers: []string{"x-forwarded-for: 10.0.0.4"}, domain: "10.0.0.4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("GET", "/v1/check?resource=c/gcra"+tc.query, "", tc.headers...)
			if r.status != 204 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			peek := h.do("GET", "/v1/check?copies=0&resource=c/gcra&domain="+tc.domain, "")
			if got := peek.header.Get("RateLimit"); got != `"gcra";r=19;t=1` {
				t.Errorf("domain %q after the check: RateLimit %q, want one token spent", tc.domain, got)
			}
		})
	}
	for _, tc := range []struct {
		name    string
		headers []string
		msg     string
	}{
		{name: "no source", msg: "domain: required: give the query parameter domain, the header Obol-Domain or the header X-Forwarded-For"},
		{name: "empty first element", headers: []string{"X-Forwarded-For: , 10.0.0.1"},
			msg: `domain: the first element of the header X-Forwarded-For is empty, got ", 10.0.0.1"`},
		{name: "blank", headers: []string{"X-Forwarded-For: \t"}, msg: "the first element of the header X-Forwarded-For is empty"},
		{name: "too long", headers: []string{"X-Forwarded-For: " + strings.Repeat("a", 257)}, msg: "domain: must be at most 256 bytes, got 257 bytes"},
		{name: "empty Obol-Domain is not skipped", headers: []string{"Obol-Domain: ", "X-Forwarded-For: 10.0.0.1"}, msg: "domain: must not be empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("GET", "/v1/check?resource=c/gcra", "", tc.headers...)
			if code, msg := errorReply(t, r.body); r.status != 400 || code != "bad_request" || !strings.Contains(msg, tc.msg) {
				t.Errorf("%d %s %q, want 400 bad_request containing %q", r.status, code, msg, tc.msg)
			}
		})
	}
	// Without the option the header is not read.
	plain := newCheckHarness(t, Options{})
	r := plain.do("GET", "/v1/check?resource=c/gcra", "", "X-Forwarded-For: 10.0.0.1")
	if code, msg := errorReply(t, r.body); r.status != 400 || code != "bad_request" ||
		!strings.Contains(msg, "domain: required: give the query parameter domain or the header Obol-Domain") {
		t.Errorf("no CheckDomainHeader: %d %s %q", r.status, code, msg)
	}
}

// TestCheckNginxAuthRequest is the nginx auth_request exchange: the
// resource and domain come from headers the proxy sets (the client's
// address from X-Forwarded-For), a rejection is the 403 nginx passes on,
// and both answers carry the RateLimit fields for the proxy to copy.
func TestCheckNginxAuthRequest(t *testing.T) {
	h := newCheckHarness(t, Options{CheckDomainHeader: "X-Forwarded-For"})
	hdrs := []string{"Obol-Resource: c/hard", "Obol-Deny-Status: 403", "X-Forwarded-For: 203.0.113.7, 10.0.0.1"}
	for i := range 3 {
		r := h.do("GET", "/v1/check", "", hdrs...)
		if r.status != 204 || r.header.Get("RateLimit") == "" {
			t.Fatalf("request %d: %d %v", i, r.status, r.header)
		}
	}
	r := h.do("GET", "/v1/check", "", hdrs...)
	if r.status != 403 || r.header.Get("Retry-After") != "1" || r.header.Get("RateLimit") != `"hard";r=0;t=1` ||
		r.header.Get("RateLimit-Policy") != `"t1";q=50;w=1, "hard";q=3;w=1` {
		t.Fatalf("fourth request: %d %v, want 403 with the fields", r.status, r.header)
	}
}

// TestCheckPolicyFollowsTheEngine checks that the policy list is the one
// of the config in force: a new engine (a reload) brings its own.
func TestCheckPolicyFollowsTheEngine(t *testing.T) {
	h := newCheckHarness(t, Options{})
	if r := h.do("GET", "/v1/check?resource=c/hard&domain=d&copies=0", ""); r.header.Get("RateLimit-Policy") != `"t1";q=50;w=1, "hard";q=3;w=1` {
		t.Fatalf("before: %q", r.header.Get("RateLimit-Policy"))
	}
	cfg, err := config.Parse([]byte(`resources: {c/hard: {kind: tiers, tiers: "7,2,2,0", global_limit: 9}}`))
	if err != nil {
		t.Fatal(err)
	}
	h.srv.SetEngine(local.New(cfg))
	r := h.do("GET", "/v1/check?resource=c/hard&domain=d&copies=0", "")
	if got := [2]string{r.header.Get("RateLimit-Policy"), r.header.Get("RateLimit")}; got != [2]string{`"t1";q=7;w=2, "global";q=9;w=1`, `"t1";r=7;t=2`} {
		t.Errorf("after: %q", got)
	}
}

// FuzzReadCheckQuery feeds any query to /v1/check's query reader: an error
// is a client error with a message, and what it accepts is in range.
func FuzzReadCheckQuery(f *testing.F) {
	for _, s := range []string{
		"resource=a/b&domain=d&copies=3&deny_status=403&headers=both",
		"deny_status=200", "headers=draft03&headers=draft11", "x=1", "copies=-1&deny_status=599",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		var args fasthttp.Args
		args.Parse(query)
		var b wireBody
		q, err := readCheckQuery(&b, &args)
		if err != nil {
			if _, _, msg, ok := classify(err); !ok || msg == "" {
				t.Fatalf("query error %v is not a client error", err)
			}
			return
		}
		if q.deny != 0 && (q.deny < minDenyStatus || q.deny > maxDenyStatus) {
			t.Fatalf("deny_status %d accepted", q.deny)
		}
		if q.form != 0 && q.form != formDraft11 && q.form != formDraft03 && q.form != formBoth {
			t.Fatalf("headers form %d accepted", q.form)
		}
		if b.has(fCopies) && (b.copies < 0 || b.copies > maxCopies) {
			t.Fatalf("copies %d accepted", b.copies)
		}
		for _, v := range [][]byte{b.resource, b.domain} {
			if v != nil && checkName("name", v) != nil {
				t.Fatalf("name %q accepted", v)
			}
		}
	})
}

// FuzzRateLimitFields checks, for any state a walk of requests and
// instants leaves a domain in, that the fields of every /v1/check reply
// parse strictly and name a listed policy with r ≤ q, and that a
// rejection's t is never past its Retry-After.
func FuzzRateLimitFields(f *testing.F) {
	f.Add([]byte{1, 7, 3, 200, 0, 55, 9, 1})
	f.Add([]byte{60, 0, 0, 0, 250, 250, 1})
	f.Fuzz(func(t *testing.T, steps []byte) {
		if len(steps) > 64 {
			steps = steps[:64]
		}
		s := benchServerAt(t)
		now := t0
		for i, st := range steps {
			now = now.Add(time.Duration(st%16) * 150 * time.Millisecond)
			res := []string{"t/tiers", "t/gcra", "t/none"}[int(st/16)%3]
			copies := int(st/48) * 3
			if res == "t/gcra" {
				copies = min(copies, 20)
			}
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("GET")
			ctx.Request.SetRequestURI("/v1/check?domain=d&resource=" + res + "&copies=" + strconv.Itoa(copies))
			s.clock.set(now)
			s.srv.Handler(&ctx)
			code := ctx.Response.StatusCode()
			if code != 204 && code != 429 {
				t.Fatalf("step %d: status %d: %s", i, code, ctx.Response.Body())
			}
			r := reply{status: code, header: http.Header{}}
			for k, v := range ctx.Response.Header.All() {
				r.header.Add(string(k), string(v))
			}
			_, it := rateFields(t, r)
			if ra := r.header.Get("Retry-After"); ra != "" {
				sec, _ := strconv.ParseInt(ra, 10, 64)
				if tv, ok := it.param("t"); !ok || tv > sec {
					t.Fatalf("step %d: RateLimit %q with Retry-After %s", i, r.header.Get("RateLimit"), ra)
				}
			}
		}
	})
}

// clockedServer is a Server on the test config with a settable clock.
type clockedServer struct {
	srv   *Server
	clock *clock
}

func benchServerAt(tb testing.TB) clockedServer {
	c := &clock{t: t0}
	return clockedServer{New(testEngine(tb), Options{Now: c.now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}), c}
}
