package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/wire/replies"
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
	ctx.Request.Header.SetContentType(contentTypeJSON)
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

var benchBodyMsgpack = func() []byte {
	b, err := msgpack.Marshal(map[string]any{"resource": "t/tiers", "domain": "user-42", "copies": 1, "min_copies": 1})
	if err != nil {
		panic(err)
	}
	return b
}()

func BenchmarkDecodeRequestMsgpack(b *testing.B) {
	var w wireBody
	b.ReportAllocs()
	b.SetBytes(int64(len(benchBodyMsgpack)))
	for b.Loop() {
		w.reset()
		if err := w.decodeMsgpack(benchBodyMsgpack, requestFields, fResource|fDomain); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeDecisionMsgpack(b *testing.B) {
	d := local.Decision{Kind: config.KindTiers, Granted: 1, Remaining: 54, ResetAfter: time.Second, Tier: 1, TierLimit: 5,
		TierHits: 1, Burst: true, HardLimit: 100, DomainHitsLastSecond: 1, GlobalHitsLastSecond: 1}
	w := replies.NewWriter(formatMsgpack)
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = writeDecision(w, buf[:0], &d)
	}
}

// benchServer is a Server on the test config at the fixed instant t0,
// logging nowhere.
func benchServer(tb testing.TB) *Server {
	return New(testEngine(tb), Options{
		Now:    func() time.Time { return t0 },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

// BenchmarkRequestHandlerMsgpack is BenchmarkRequestHandler with a
// MessagePack body and reply.
func BenchmarkRequestHandlerMsgpack(b *testing.B) {
	s := benchServer(b)
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("/v1/request")
	ctx.Request.Header.SetContentType(contentTypeMsgpack)
	ctx.Request.Header.Set("Accept", contentTypeMsgpack)
	ctx.Request.SetBody(benchBodyMsgpack)
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		s.Handler(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}

// batchBench returns a server and a POST /v1/batch of n requests (tiers
// and gcra, over 10 domains), in JSON or MessagePack both ways.
func batchBench(tb testing.TB, n int, asMsgpack bool) (*Server, *fasthttp.RequestCtx) {
	s := benchServer(tb)
	items := make([]any, n)
	js := make([]string, n)
	for i := range n {
		res := []string{"t/tiers", "t/gcra"}[i%2]
		dom := fmt.Sprintf("user-%d", i%10)
		items[i] = map[string]any{"resource": res, "domain": dom, "copies": 1}
		js[i] = fmt.Sprintf(`{"resource":%q,"domain":%q,"copies":1}`, res, dom)
	}
	ctx := new(fasthttp.RequestCtx)
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("/v1/batch")
	if asMsgpack {
		body, err := msgpack.Marshal(map[string]any{"requests": items})
		if err != nil {
			tb.Fatal(err)
		}
		ctx.Request.Header.SetContentType(contentTypeMsgpack)
		ctx.Request.Header.Set("Accept", contentTypeMsgpack)
		ctx.Request.SetBody(body)
	} else {
		ctx.Request.Header.SetContentType(contentTypeJSON)
		ctx.Request.SetBody([]byte(batchJSON(js...)))
	}
	return s, ctx
}

// BenchmarkBatchHandler runs POST /v1/batch of 100 requests through the
// route table and handler: decode, 100 decisions, encode, and the copy of
// the reply to a buffer standing for the connection.
func BenchmarkBatchHandler(b *testing.B) {
	const n = 100
	for _, asMsgpack := range []bool{false, true} {
		b.Run(map[bool]string{false: "json", true: "msgpack"}[asMsgpack], func(b *testing.B) {
			s, ctx := batchBench(b, n, asMsgpack)
			var conn bytes.Buffer
			b.SetBytes(int64(len(ctx.Request.Body())))
			b.ReportAllocs()
			for b.Loop() {
				ctx.Response.Reset()
				s.Handler(ctx)
				conn.Reset()
				if err := ctx.Response.BodyWriteTo(&conn); err != nil || ctx.Response.StatusCode() != 200 {
					b.Fatalf("status %d (%v): %s", ctx.Response.StatusCode(), err, conn.Bytes())
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

// BenchmarkEncodeReplies writes each reply of replyCases (the copies
// endpoints', the error object, the refund and the pacing replies) in JSON
// and MessagePack into a reused buffer: it must allocate nothing.
func BenchmarkEncodeReplies(b *testing.B) {
	for _, f := range []format{formatJSON, formatMsgpack} {
		w := replies.NewWriter(f)
		for _, c := range replyCases {
			b.Run(map[format]string{formatJSON: "json", formatMsgpack: "msgpack"}[f]+"/"+c.name, func(b *testing.B) {
				buf := make([]byte, 0, 512)
				b.ReportAllocs()
				for b.Loop() {
					buf = c.write(w, buf[:0])
				}
			})
		}
	}
}

// BenchmarkCopiesHandlers runs POST /v1/reserve of 3 copies in a group, then
// POST /v1/release of them, through the route table and handlers, in JSON
// and in MessagePack both ways: one iteration is the two requests.
func BenchmarkCopiesHandlers(b *testing.B) {
	for _, asMsgpack := range []bool{false, true} {
		b.Run(map[bool]string{false: "json", true: "msgpack"}[asMsgpack], func(b *testing.B) {
			s := benchServer(b)
			sid, err := s.Engine().OpenSession(t0, time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			var reserve, release fasthttp.RequestCtx
			for _, ctx := range []*fasthttp.RequestCtx{&reserve, &release} {
				ctx.Request.Header.SetMethod("POST")
				if asMsgpack {
					ctx.Request.Header.SetContentType(contentTypeMsgpack)
					ctx.Request.Header.Set("Accept", contentTypeMsgpack)
				} else {
					ctx.Request.Header.SetContentType(contentTypeJSON)
				}
			}
			reserve.Request.SetRequestURI("/v1/reserve")
			release.Request.SetRequestURI("/v1/release")
			body := func(m map[string]any) []byte {
				if asMsgpack {
					out, err := msgpack.Marshal(m)
					if err != nil {
						b.Fatal(err)
					}
					return out
				}
				out, err := json.Marshal(m)
				if err != nil {
					b.Fatal(err)
				}
				return out
			}
			reserve.Request.SetBody(body(map[string]any{"resource": "t/copies", "domain": "acme", "copies": 3, "session": sid}))
			b.ReportAllocs()
			for b.Loop() {
				reserve.Response.Reset()
				s.Handler(&reserve)
				b.StopTimer() // reading the hold is the client's work
				var r replies.Reservation
				if asMsgpack {
					var m map[string]any
					if err := msgpack.Unmarshal(reserve.Response.Body(), &m); err != nil {
						b.Fatal(err)
					}
					r.Hold, _ = m["hold"].(string)
				} else if err := replies.ReadReservation(reserve.Response.Body(), &r); err != nil {
					b.Fatal(err)
				}
				if reserve.Response.StatusCode() != 200 || r.Hold == "" {
					b.Fatalf("reserve: status %d: %q", reserve.Response.StatusCode(), reserve.Response.Body())
				}
				release.Request.SetBody(body(map[string]any{"hold": r.Hold, "copies": 3}))
				b.StartTimer()
				release.Response.Reset()
				s.Handler(&release)
				if release.Response.StatusCode() != 200 {
					b.Fatalf("release: status %d: %q", release.Response.StatusCode(), release.Response.Body())
				}
			}
		})
	}
}
