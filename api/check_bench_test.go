package api

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// BenchmarkCheck runs GET /v1/check through the route table and handler,
// without the network: query, engine, RateLimit fields and (on a
// rejection) Retry-After and the body. The instant is fixed, so a grant is
// a peek (copies=0), which does every step but the commit; a rejection
// changes nothing and stays one. Each domain is tracked (spent once
// before), as a domain in steady use is.
func BenchmarkCheck(b *testing.B) {
	for _, bc := range []struct {
		name, setup, uri string
		headers          [][2]string
		status           int
	}{
		{name: "tiers-204", setup: `{"resource":"t/tiers","domain":"d"}`,
			uri: "/v1/check?resource=t/tiers&domain=d&copies=0", status: 204},
		{name: "gcra-204", setup: `{"resource":"t/gcra","domain":"d"}`,
			uri: "/v1/check?resource=t/gcra&domain=d&copies=0", status: 204},
		{name: "gcra-429", setup: `{"resource":"t/gcra","domain":"d","copies":20}`,
			uri: "/v1/check?resource=t/gcra&domain=d", status: 429},
		// nginx auth_request: everything in headers, the domain the first
		// address of X-Forwarded-For, a rejection as 403.
		{name: "nginx-403", setup: `{"resource":"t/gcra","domain":"203.0.113.7","copies":20}`,
			uri: "/v1/check", status: 403, headers: [][2]string{
				{"Obol-Resource", "t/gcra"}, {"Obol-Deny-Status", "403"},
				{"X-Forwarded-For", "203.0.113.7, 10.0.0.1"}, {"User-Agent", "nginx"}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := New(testEngine(b), Options{
				Now:               func() time.Time { return t0 },
				Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
				CheckDomainHeader: "X-Forwarded-For",
			})
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.SetRequestURI("/v1/request")
			ctx.Request.Header.SetContentType(contentTypeJSON)
			ctx.Request.SetBody([]byte(bc.setup))
			s.Handler(&ctx)
			if ctx.Response.StatusCode() != 200 {
				b.Fatalf("setup: status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
			ctx.Request.Reset()
			ctx.Response.Reset()
			ctx.Request.Header.SetMethod("GET")
			ctx.Request.SetRequestURI(bc.uri)
			for _, h := range bc.headers {
				ctx.Request.Header.Set(h[0], h[1])
			}
			b.ReportAllocs()
			for b.Loop() {
				ctx.Response.Reset()
				s.Handler(&ctx)
				if ctx.Response.StatusCode() != bc.status {
					b.Fatalf("status %d, want %d: %s", ctx.Response.StatusCode(), bc.status, ctx.Response.Body())
				}
			}
		})
	}
}
