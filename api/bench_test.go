package api

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

var benchBody = []byte(`{"resource":"t/tiers","domain":"user-42","copies":1,"min_copies":1}`)

func BenchmarkDecodeRequest(b *testing.B) {
	var w wireBody
	b.ReportAllocs()
	b.SetBytes(int64(len(benchBody)))
	for b.Loop() {
		w.reset()
		if err := w.decode(benchBody, requestFields, fResource|fDomain); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeDecision(b *testing.B) {
	for _, d := range []local.Decision{
		{Kind: config.KindTiers, Granted: 1, Remaining: 54, ResetAfter: time.Second, Tier: 1, TierLimit: 5,
			TierHits: 1, Burst: true, HardLimit: 100, DomainHitsLastSecond: 1, GlobalHitsLastSecond: 1},
		{Kind: config.KindGCRA, Granted: 1, Remaining: 19, ResetAfter: 50 * time.Millisecond},
	} {
		b.Run(string(d.Kind), func(b *testing.B) {
			buf := make([]byte, 0, 512)
			b.ReportAllocs()
			for b.Loop() {
				buf = appendDecision(buf[:0], &d)
			}
		})
	}
}

// BenchmarkRequestHandler runs POST /v1/request through the route table and
// handler, without the network: decode, engine, encode.
func BenchmarkRequestHandler(b *testing.B) {
	s := New(testEngine(b), Options{
		Now:    func() time.Time { return t0 },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("/v1/request")
	ctx.Request.SetBody(benchBody)
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		s.Handler(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}
