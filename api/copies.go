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
	c.reply(ctx, replies.AppendSession(c.writer(ctx), c.out[:0], id, ttl))
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
	c.reply(ctx, replies.AppendSession(c.writer(ctx), c.out[:0], sid, ceilMs(ttl)))
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
	c.reply(ctx, replies.AppendInt(c.writer(ctx), c.out[:0], replies.KeyReleased, int64(n)))
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
	c.reply(ctx, replies.AppendReleased(c.writer(ctx), c.out[:0], int64(released), int64(held)))
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
	c.reply(ctx, replies.AppendTransfer(c.writer(ctx), c.out[:0], id))
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

// writeReservation writes the reply of a reserve (replies.AppendReservation)
// from the engine's reservation.
func writeReservation(w replies.Writer, b []byte, r *local.Reservation) []byte {
	wr := replies.Reservation{
		Granted:     int64(r.Granted),
		Hold:        r.Hold,
		DomainLimit: int64(r.DomainLimit),
		GlobalLimit: int64(r.GlobalLimit),
		DomainHolds: int64(r.DomainHolds),
		GlobalHolds: int64(r.GlobalHolds),
		Shadow:      r.Shadow,
		Lenient:     r.Lenient,
	}
	if len(r.Groups) == 0 {
		return replies.AppendReservation(w, b, &wr)
	}
	// The groups are converted on the stack when there are at most 8 (a
	// domain is in few groups): the reply allocates nothing.
	var buf [8]replies.GroupHolds
	groups := buf[:0]
	if len(r.Groups) > len(buf) {
		groups = make([]replies.GroupHolds, 0, len(r.Groups))
	}
	for _, g := range r.Groups {
		groups = append(groups, replies.GroupHolds{Name: g.Name, Limit: int64(g.Limit), Holds: int64(g.Holds)})
	}
	wr.Groups = groups
	return replies.AppendReservation(w, b, &wr)
}

// writeSeized writes the reply of a seize (replies.AppendSeized) from the
// engine's.
func writeSeized(w replies.Writer, b []byte, s *local.Seized) []byte {
	ws := replies.Seized{Hold: s.Hold, Resource: s.Resource, Domain: s.Domain, Groups: s.Groups, Copies: int64(s.Copies)}
	return replies.AppendSeized(w, b, &ws)
}
