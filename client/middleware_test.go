package client

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestMiddleware(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, logs := newClient(t, Config{Socket: a.sock, Clock: fc})
	served := 0
	h := Middleware(c, func(r *http.Request) (string, string, bool) {
		res := r.Header.Get("X-Resource")
		return res, r.Header.Get("X-User"), res != ""
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		w.WriteHeader(http.StatusOK)
	}))
	do := func(resource, user string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/search", nil)
		if resource != "" {
			req.Header.Set("X-Resource", resource)
		}
		req.Header.Set("X-User", user)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for i, s := range []struct {
		resource, user    string
		status            int
		served            int
		retryAfter        string
		policy, ratelimit string
	}{
		{resource: "t/one", user: "u", status: 200, served: 1, policy: `"gcra";q=1;w=1`, ratelimit: `"gcra";r=0;t=1`},
		{resource: "t/one", user: "u", status: 429, served: 1, retryAfter: "1", policy: `"gcra";q=1;w=1`, ratelimit: `"gcra";r=0;t=1`},
		{resource: "t/none", user: "u", status: 429, served: 1}, // never: no Retry-After
		{resource: "", user: "u", status: 200, served: 2},       // no key: not asked
		{resource: "nope/x", user: "u", status: 200, served: 3}, // a client error fails open
	} {
		rec := do(s.resource, s.user)
		hd := rec.Header()
		if rec.Code != s.status || served != s.served || hd.Get("Retry-After") != s.retryAfter {
			t.Fatalf("step %d: status %d, served %d, Retry-After %q; want %d, %d, %q",
				i, rec.Code, served, hd.Get("Retry-After"), s.status, s.served, s.retryAfter)
		}
		if s.policy != "" && (hd.Get("RateLimit-Policy") != s.policy || hd.Get("RateLimit") != s.ratelimit) {
			t.Fatalf("step %d: RateLimit-Policy %q, RateLimit %q; want %q, %q",
				i, hd.Get("RateLimit-Policy"), hd.Get("RateLimit"), s.policy, s.ratelimit)
		}
	}
	if n := logs.lines("middleware"); n != 1 {
		t.Errorf("logged %d middleware errors, want 1", n)
	}
	// Degraded: the agent is gone, requests pass.
	a.stop()
	if rec := do("t/one", "u"); rec.Code != 200 || served != 4 {
		t.Fatalf("degraded: status %d, served %d", rec.Code, served)
	}
}

func TestFastHTTPMiddleware(t *testing.T) {
	fc := fakeClock()
	a := startAgent(t, fc.Now)
	c, _ := newClient(t, Config{Socket: a.sock, Clock: fc})
	served := 0
	h := FastHTTPMiddleware(c, func(ctx *fasthttp.RequestCtx) (string, string, bool) {
		return "t/one", string(ctx.Request.Header.Peek("X-User")), true
	}, MaxWait(0))(func(ctx *fasthttp.RequestCtx) {
		served++
		ctx.SetStatusCode(200)
	})
	do := func() *fasthttp.RequestCtx {
		var req fasthttp.Request
		req.Header.Set("X-User", "u")
		ctx := new(fasthttp.RequestCtx)
		ctx.Init(&req, nil, nil)
		h(ctx)
		return ctx
	}
	ctx := do()
	if ctx.Response.StatusCode() != 200 || served != 1 ||
		fastHeader(ctx, "RateLimit") != `"gcra";r=0;t=1` {
		t.Fatalf("granted: status %d served %d headers %s", ctx.Response.StatusCode(), served, ctx.Response.Header.String())
	}
	ctx = do()
	if ctx.Response.StatusCode() != 429 || served != 1 || string(ctx.Response.Header.Peek("Retry-After")) != "1" ||
		fastHeader(ctx, "RateLimit-Policy") != `"gcra";q=1;w=1` {
		t.Fatalf("rejected: status %d served %d headers %s", ctx.Response.StatusCode(), served, ctx.Response.Header.String())
	}
}

// fastHeader returns a response header set with its exact case (which
// Peek, normalizing the name, would not find).
func fastHeader(ctx *fasthttp.RequestCtx, name string) string {
	for k, v := range ctx.Response.Header.All() {
		if strings.EqualFold(string(k), name) {
			return string(v)
		}
	}
	return ""
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    int64 // ms
		want int64
		ok   bool
	}{{d: 0, want: 1, ok: true}, {d: 1, want: 1, ok: true}, {d: 1000, want: 1, ok: true}, {d: 1001, want: 2, ok: true}, {d: -1, want: 0, ok: false}} {
		d := Never
		if tc.d >= 0 {
			d = time.Duration(tc.d) * time.Millisecond
		}
		if got, ok := retryAfterSeconds(d); got != tc.want || ok != tc.ok {
			t.Errorf("retryAfterSeconds(%dms) = %d, %v; want %d, %v", tc.d, got, ok, tc.want, tc.ok)
		}
	}
}
