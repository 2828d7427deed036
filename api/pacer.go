package api

import (
	"math"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/wire/replies"
	"github.com/obol-dev/obol/local"
)

// The client pacer (kind pacer): POST /v1/pace before a call to the paced
// API, POST /v1/observe after it.

// maxHeaderValue is the longest raw header value /v1/observe takes.
const maxHeaderValue = 8 << 10

// POST /v1/pace {"resource"} → {"wait_ms"}: how long to wait before the
// call (rounded up to the millisecond), which the pacer counts as made
// then; "lenient": true when the resource is paced without a pacer.
func (s *Server) pace(ctx *fasthttp.RequestCtx, _ params) {
	c, g, ok := s.open(ctx, paceFields, paceFields)
	if !ok {
		return
	}
	defer putCall(c)
	b := &c.body
	name := g.name(b.resource)
	p, err := g.engine.Pace(s.now(), name)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	g.countPace(name, &p)
	c.reply(ctx, writePacing(c.writer(ctx), c.out[:0], &p, false))
}

// POST /v1/observe {"resource", "status", "remaining"} (or the raw
// "ratelimit" and/or "ratelimit_remaining" header values instead of
// remaining) → {"wait_ms", "remaining", "rate_per_s"}: what the pacer
// knows after the reply.
func (s *Server) observe(ctx *fasthttp.RequestCtx, _ params) {
	c, g, ok := s.open(ctx, observeFields, observeRequired)
	if !ok {
		return
	}
	defer putCall(c)
	b := &c.body
	name := g.name(b.resource)
	p, err := g.engine.Observe(s.now(), name, int(b.status), int(b.count))
	if err != nil {
		s.fail(ctx, err)
		return
	}
	g.countObserve(name, int(b.status), &p)
	c.reply(ctx, writePacing(c.writer(ctx), c.out[:0], &p, true))
}

// writePacing writes the reply of pace (wait_ms) or, with full, of observe
// (wait_ms, then remaining when the pacer has seen one and rate_per_s, to 6
// significant digits, when it paces); lenient is added when true.
func writePacing(w replies.Writer, b []byte, p *local.Pacing, full bool) []byte {
	showRemaining := full && p.Remaining >= 0
	showRate := full && !math.IsInf(p.Rate, 0) && !math.IsNaN(p.Rate)
	b = w.Object(b, 1+btoi(showRemaining)+btoi(showRate)+btoi(p.Lenient))
	b = w.Int(w.First(b, replies.KeyWaitMs), ceilMs(p.Wait))
	if showRemaining {
		b = w.Int(w.Key(b, replies.KeyRemaining), int64(p.Remaining))
	}
	if showRate {
		b = w.Float(w.Key(b, `,"rate_per_s":`), p.Rate)
	}
	if p.Lenient {
		b = w.Bool(w.Key(b, `,"lenient":`), true)
	}
	return w.End(b)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pacerStateReply is the "pacer" object of GET /v1/state for a pacer
// resource: what POST /v1/observe would report, without observing.
type pacerStateReply struct {
	WaitMs    int64    `json:"wait_ms"`
	Remaining *int     `json:"remaining,omitempty"`
	RatePerS  *float64 `json:"rate_per_s,omitempty"`
}

// pacerState returns the pacer object of GET /v1/state, nil when the
// resource has no pacer (its namespace ignores its config).
func pacerState(e *local.Engine, now time.Time, resource string) *pacerStateReply {
	p, ok := e.PacerStatus(now, resource)
	if !ok {
		return nil
	}
	r := &pacerStateReply{WaitMs: ceilMs(p.Wait)}
	if p.Remaining >= 0 {
		r.Remaining = &p.Remaining
	}
	if !math.IsInf(p.Rate, 0) && !math.IsNaN(p.Rate) {
		rate := replies.Round6(p.Rate)
		r.RatePerS = &rate
	}
	return r
}
