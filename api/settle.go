package api

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/wire/replies"
	"github.com/obol-dev/obol/local"
)

// Check now, charge later (local.Engine.DecideSettle, Settle): a request
// with "settle": true is decided as any, and a grant carries a "ticket";
// POST /v1/settle {"ticket", "copies"} charges the request's real cost in
// place of its estimate, once.

// requestSettle answers a POST /v1/request with "settle": true: the
// decision, with "ticket" when granted.
func (s *Server) requestSettle(ctx *fasthttp.RequestCtx, c *call, g *generation, start time.Time) {
	copies, minCopies := c.body.counts()
	resource, rm, err := s.limited(g, c.body.resource, c.body.limit)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	now := s.decisionTime(start)
	var d local.Decision
	tk, err := g.engine.DecideSettle(&d, now, resource, string(c.body.domain), copies, minCopies)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	wd := wireDecision(&d)
	wd.Ticket = tk
	c.reply(ctx, replies.AppendDecision(c.writer(ctx), c.out[:0], &wd))
	g.observe(rm, resource, c.body.domain, copies, &d, now, start)
}

// POST /v1/settle {"ticket", "copies"} → {"charged": C, "remaining": R}:
// C is the real cost less the estimate (negative: given back), R what a
// request of the key could get now.
func (s *Server) settle(ctx *fasthttp.RequestCtx, _ params) {
	c, g, ok := s.open(ctx, settleFields, settleFields)
	if !ok {
		return
	}
	defer putCall(c)
	st, err := g.engine.Settle(s.now(), string(c.body.ticket), int(c.body.copies))
	if err != nil {
		s.fail(ctx, err)
		return
	}
	w := c.writer(ctx)
	b := w.Object(c.out[:0], 2)
	b = w.Int(w.First(b, `,"charged":`), int64(st.Charged))
	b = w.Int(w.Key(b, replies.KeyRemaining), int64(st.Remaining))
	c.reply(ctx, w.End(b))
}
