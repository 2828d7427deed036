package api

import (
	"testing"

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
		status           int
	}{
		{name: "tiers-204", setup: `{"resource":"t/tiers","domain":"d"}`,
			uri: "/v1/check?resource=t/tiers&domain=d&copies=0", status: 204},
		{name: "gcra-204", setup: `{"resource":"t/gcra","domain":"d"}`,
			uri: "/v1/check?resource=t/gcra&domain=d&copies=0", status: 204},
		{name: "gcra-429", setup: `{"resource":"t/gcra","domain":"d","copies":20}`,
			uri: "/v1/check?resource=t/gcra&domain=d", status: 429},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := benchServer(b)
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.SetRequestURI("/v1/request")
			ctx.Request.SetBody([]byte(bc.setup))
			s.Handler(&ctx)
			if ctx.Response.StatusCode() != 200 {
				b.Fatalf("setup: status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
			ctx.Request.Reset()
			ctx.Response.Reset()
			ctx.Request.Header.SetMethod("GET")
			ctx.Request.SetRequestURI(bc.uri)
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
