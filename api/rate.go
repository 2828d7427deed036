package api

import (
	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/wire/replies"
	"github.com/obol-dev/obol/local"
)

// POST /v1/request {"resource", "domain", "copies", "min_copies", "limit",
// "settle"} → a rate
// decision. This is the hot path: the body (JSON or MessagePack) is decoded
// into a pooled struct and the reply (JSON or MessagePack, as Accept asks)
// appended into a pooled buffer.
func (s *Server) request(ctx *fasthttp.RequestCtx, _ params) {
	start := handlerStart(ctx)
	c, g, ok := s.open(ctx, requestSettleFields, fResource|fDomain)
	if !ok {
		return
	}
	defer putCall(c)
	if c.body.settle {
		s.requestSettle(ctx, c, g, start) // settle.go
		return
	}
	copies, minCopies := c.body.counts()
	var d local.Decision
	resource, rm, err := s.limited(g, c.body.resource, c.body.limit)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	now := s.decisionTime(start)
	if err := g.engine.Decide(&d, now, resource, string(c.body.domain), copies, minCopies); err != nil {
		s.fail(ctx, err)
		return
	}
	c.reply(ctx, writeDecision(c.writer(ctx), c.out[:0], &d))
	g.observe(rm, resource, c.body.domain, copies, &d, now, start)
}

// POST /v1/refund {"resource", "domain", "copies"} → {"remaining": N} (gcra).
func (s *Server) refund(ctx *fasthttp.RequestCtx, _ params) {
	c, g, ok := s.open(ctx, refundFields, fResource|fDomain)
	if !ok {
		return
	}
	defer putCall(c)
	copies, _ := c.body.counts()
	resource, _, err := s.limited(g, c.body.resource, c.body.limit)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	remaining, err := g.engine.Refund(s.now(), resource, string(c.body.domain), copies)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	c.reply(ctx, replies.AppendInt(c.writer(ctx), c.out[:0], replies.KeyRemaining, int64(remaining)))
}
