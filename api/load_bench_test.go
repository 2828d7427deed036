package api

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// loadBenchConfig is bench/load's config (go run ./bench/load
// -print-config) without its RSS resource.
const loadBenchConfig = `
namespaces:
  bench:
    allow_unconfigured: false
resources:
  bench/gcra:
    kind: gcra
    burst: 1000
    count: 1000
    period: 1s
  bench/tiers:
    kind: tiers
    tiers: "1,1,1,0,10,5,5,15"
    hard_limit: 100
`

// BenchmarkRequestHandlerLoad is POST /v1/request JSON as bench/load sends
// it: 10,000 domains drawn at random, the even ones on a gcra resource and
// the odd ones on a tiers resource, decided on the agent's time base (the
// real clock), so that the keys, the /v1/top windows and the metrics see
// what they see under the load, without the network.
func BenchmarkRequestHandlerLoad(b *testing.B) {
	cfg, err := config.Parse([]byte(loadBenchConfig))
	if err != nil {
		b.Fatal(err)
	}
	s := New(local.New(cfg), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	res := []string{"bench/gcra", "bench/tiers"}
	bodies := make([][]byte, 10_000)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"resource":%q,"domain":"user-%d","copies":1,"min_copies":1}`, res[i%2], i)
	}
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("/v1/request")
	ctx.Request.Header.SetContentType(contentTypeJSON)
	ctx.Request.Header.Set("Accept", contentTypeJSON)
	rng := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	for b.Loop() {
		ctx.Request.SetBody(bodies[rng.IntN(len(bodies))])
		ctx.Response.Reset()
		s.Handler(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}
