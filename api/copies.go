package api

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/wire/replies"
	"github.com/obol-dev/obol/local"
)

// sessionPath reads the request of a session's path: a body empty or {},
// and the session id, {id}. It writes the error reply and returns ok false
// when either is bad.
// On ok, the caller defers putCall(c).
func (s *Server) sessionPath(ctx *fasthttp.RequestCtx, p params) (c *call, id string, ok bool) {
	if c, _, ok = s.open(ctx, 0, 0); !ok {
		return nil, "", false
	}
	if err := checkName("session", p.id); err != nil {
		putCall(c)
		s.fail(ctx, err)
		return nil, "", false
	}
	return c, string(p.id), true
}

// POST /v1/sessions {"ttl_ms"} → {"session", "ttl_ms"}. ttl_ms is optional
// (default 30000); an empty body is {}.
func (s *Server) openSession(ctx *fasthttp.RequestCtx, _ params) {
	c, _, ok := s.open(ctx, sessionFields, 0)
	if !ok {
		return
	}
	defer putCall(c)
	ttl := c.body.ttl()
	id, err := s.Engine().OpenSession(s.now(), time.Duration(ttl)*time.Millisecond)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	c.reply(ctx, writeSession(c.writer(ctx), c.out[:0], id, ttl))
}

// POST /v1/sessions/{id}/keepalive → {"session", "ttl_ms"}. The body must be
// empty or {}.
func (s *Server) keepAlive(ctx *fasthttp.RequestCtx, p params) {
	c, sid, ok := s.sessionPath(ctx, p)
	if !ok {
		return
	}
	defer putCall(c)
	ttl, err := s.Engine().KeepAlive(s.now(), sid)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	c.reply(ctx, writeSession(c.writer(ctx), c.out[:0], sid, ceilMs(ttl)))
}

// DELETE /v1/sessions/{id} → {"released": N}, the copies its holds freed.
func (s *Server) endSession(ctx *fasthttp.RequestCtx, p params) {
	c, sid, ok := s.sessionPath(ctx, p)
	if !ok {
		return
	}
	defer putCall(c)
	n, err := s.Engine().EndSession(s.now(), sid)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	c.reply(ctx, writeInt(c.writer(ctx), c.out[:0], `,"released":`, int64(n)))
}

// POST /v1/reserve {"resource", "domain", "copies", "min_copies", "session"}
// → the reservation; a rejection is {"granted": 0, ...} with no "hold".
func (s *Server) reserve(ctx *fasthttp.RequestCtx, _ params) {
	c, g, ok := s.open(ctx, reserveFields, fResource|fDomain|fSession)
	if !ok {
		return
	}
	defer putCall(c)
	copies, minCopies := c.body.counts()
	now, resource := s.now(), g.name(c.body.resource)
	r, err := g.engine.Reserve(now, resource, string(c.body.domain),
		copies, minCopies, string(c.body.session))
	if err != nil {
		s.fail(ctx, err)
		return
	}
	g.countReserve(resource, c.body.domain, copies, &r, now)
	c.reply(ctx, writeReservation(c.writer(ctx), c.out[:0], &r))
}

// POST /v1/release {"hold", "copies"} → {"released": N, "held": M}. copies
// defaults to 1.
func (s *Server) release(ctx *fasthttp.RequestCtx, _ params) {
	c, g, ok := s.open(ctx, releaseFields, fHold)
	if !ok {
		return
	}
	defer putCall(c)
	copies, _ := c.body.counts()
	hold := string(c.body.hold)
	resource, _ := g.engine.HoldResource(hold) // for the metrics: a hold's resource never changes
	released, held, err := g.engine.Release(s.now(), hold, copies)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	g.countHoldOp(resource, opRelease)
	c.reply(ctx, writeReleased(c.writer(ctx), c.out[:0], released, held))
}

// POST /v1/transfer {"hold", "copies", "ttl_ms"} → {"transfer": id}. copies
// defaults to 1, ttl_ms to 30000.
func (s *Server) transfer(ctx *fasthttp.RequestCtx, _ params) {
	c, g, ok := s.open(ctx, transferFields, fHold)
	if !ok {
		return
	}
	defer putCall(c)
	copies, _ := c.body.counts()
	hold := string(c.body.hold)
	resource, _ := g.engine.HoldResource(hold)
	id, err := g.engine.Transfer(s.now(), hold, copies,
		time.Duration(c.body.ttl())*time.Millisecond)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	g.countHoldOp(resource, opTransfer)
	c.reply(ctx, writeTransfer(c.writer(ctx), c.out[:0], id))
}

// POST /v1/seize {"transfer", "session"} → {"hold", "resource", "domain",
// "groups", "copies"}.
func (s *Server) seize(ctx *fasthttp.RequestCtx, _ params) {
	c, g, ok := s.open(ctx, seizeFields, fTransfer|fSession)
	if !ok {
		return
	}
	defer putCall(c)
	r, err := g.engine.Seize(s.now(), string(c.body.transfer), string(c.body.session))
	if err != nil {
		s.fail(ctx, err)
		return
	}
	g.countHoldOp(r.Resource, opSeize)
	c.reply(ctx, writeSeized(c.writer(ctx), c.out[:0], &r))
}

// writeSession writes the reply of opening or renewing a session.
func writeSession(w replies.Writer, b []byte, id string, ttlMs int64) []byte {
	b = w.Object(b, 2)
	b = w.String(w.First(b, `,"session":`), id)
	b = w.Int(w.Key(b, `,"ttl_ms":`), ttlMs)
	return w.End(b)
}

// writeReservation writes the reply of a reserve: "hold" only when granted,
// "groups" always (empty when the domain is in none), each group's "limit"
// when it has one, "shadow" and "lenient" only when true.
func writeReservation(w replies.Writer, b []byte, r *local.Reservation) []byte {
	hasHold, hasDomain, hasGlobal := r.Hold != "", r.DomainLimit != local.NoLimit, r.GlobalLimit != local.NoLimit
	b = w.Object(b, 4+btoi(hasHold)+btoi(hasDomain)+btoi(hasGlobal)+btoi(r.Shadow)+btoi(r.Lenient))
	b = w.Int(w.First(b, `,"granted":`), int64(r.Granted))
	if hasHold {
		b = w.String(w.Key(b, `,"hold":`), r.Hold)
	}
	if hasDomain {
		b = w.Int(w.Key(b, `,"domain_limit":`), int64(r.DomainLimit))
	}
	if hasGlobal {
		b = w.Int(w.Key(b, `,"global_limit":`), int64(r.GlobalLimit))
	}
	b = w.Int(w.Key(b, `,"domain_holds":`), int64(r.DomainHolds))
	b = w.Int(w.Key(b, `,"global_holds":`), int64(r.GlobalHolds))
	b = w.Array(w.Key(b, `,"groups":`), len(r.Groups))
	for i, g := range r.Groups {
		limited := g.Limit != local.NoLimit
		b = w.Object(w.Next(b, i), 2+btoi(limited))
		b = w.String(w.First(b, `,"name":`), g.Name)
		if limited {
			b = w.Int(w.Key(b, `,"limit":`), int64(g.Limit))
		}
		b = w.Int(w.Key(b, `,"holds":`), int64(g.Holds))
		b = w.End(b)
	}
	b = w.EndArray(b)
	if r.Shadow {
		b = w.Bool(w.Key(b, `,"shadow":`), true)
	}
	if r.Lenient {
		b = w.Bool(w.Key(b, `,"lenient":`), true)
	}
	return w.End(b)
}

// writeReleased writes the reply of a release.
func writeReleased(w replies.Writer, b []byte, released, held int) []byte {
	b = w.Object(b, 2)
	b = w.Int(w.First(b, `,"released":`), int64(released))
	b = w.Int(w.Key(b, `,"held":`), int64(held))
	return w.End(b)
}

// writeTransfer writes the reply of a transfer.
func writeTransfer(w replies.Writer, b []byte, id string) []byte {
	b = w.Object(b, 1)
	b = w.String(w.First(b, `,"transfer":`), id)
	return w.End(b)
}

// writeSeized writes the reply of a seize.
func writeSeized(w replies.Writer, b []byte, s *local.Seized) []byte {
	b = w.Object(b, 5)
	b = w.String(w.First(b, `,"hold":`), s.Hold)
	b = w.String(w.Key(b, `,"resource":`), s.Resource)
	b = w.String(w.Key(b, `,"domain":`), s.Domain)
	b = w.Array(w.Key(b, `,"groups":`), len(s.Groups))
	for i, g := range s.Groups {
		b = w.String(w.Next(b, i), g)
	}
	b = w.EndArray(b)
	b = w.Int(w.Key(b, `,"copies":`), int64(s.Copies))
	return w.End(b)
}
