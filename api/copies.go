package api

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// pathID checks the {id} of a session path.
func pathID(p params) ([]byte, error) { return p.id, checkName("session", p.id) }

// POST /v1/sessions {"ttl_ms"} → {"session", "ttl_ms"}. ttl_ms is optional
// (default 30000); an empty body is {}.
func (s *Server) openSession(ctx *fasthttp.RequestCtx, _ params) {
	c := getCall()
	defer putCall(c)
	if !s.decodeBody(ctx, c, sessionFields, 0) {
		return
	}
	ttl := c.body.ttl()
	id, err := s.Engine().OpenSession(s.now(), time.Duration(ttl)*time.Millisecond)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeSession(ctx, c, id, ttl)
}

// POST /v1/sessions/{id}/keepalive → {"session", "ttl_ms"}. The body must be
// empty or {}.
func (s *Server) keepAlive(ctx *fasthttp.RequestCtx, p params) {
	c := getCall()
	defer putCall(c)
	if !s.decodeBody(ctx, c, 0, 0) {
		return
	}
	id, err := pathID(p)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	sid := string(id)
	ttl, err := s.Engine().KeepAlive(s.now(), sid)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	s.writeSession(ctx, c, sid, ceilMs(ttl))
}

// DELETE /v1/sessions/{id} → {"released": N}, the copies its holds freed.
func (s *Server) endSession(ctx *fasthttp.RequestCtx, p params) {
	c := getCall()
	defer putCall(c)
	if !s.decodeBody(ctx, c, 0, 0) {
		return
	}
	id, err := pathID(p)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	n, err := s.Engine().EndSession(s.now(), string(id))
	if err != nil {
		s.fail(ctx, err)
		return
	}
	f := replyFormat(ctx)
	if f == formatMsgpack {
		e := &c.body.codec().e
		e.begin(c.out[:0])
		e.mapLen(1)
		e.intField("released", int64(n))
		c.out = e.end()
	} else {
		c.out = append(c.out[:0], `{"released":`...)
		c.out = strconv.AppendInt(c.out, int64(n), 10)
		c.out = append(c.out, '}')
	}
	writeReply(ctx, f, c.out)
}

// POST /v1/reserve {"resource", "domain", "copies", "min_copies", "session"}
// → the reservation; a rejection is {"granted": 0, ...} with no "hold".
func (s *Server) reserve(ctx *fasthttp.RequestCtx, _ params) {
	c := getCall()
	defer putCall(c)
	if !s.decodeBody(ctx, c, reserveFields, fResource|fDomain|fSession) {
		return
	}
	copies, minCopies := c.body.counts()
	g := s.gen.Load()
	now, resource := s.now(), g.name(c.body.resource)
	r, err := g.engine.Reserve(now, resource, string(c.body.domain),
		copies, minCopies, string(c.body.session))
	if err != nil {
		s.fail(ctx, err)
		return
	}
	g.countReserve(resource, c.body.domain, copies, &r, now)
	f := replyFormat(ctx)
	if f == formatMsgpack {
		e := &c.body.codec().e
		e.begin(c.out[:0])
		e.reservation(&r)
		c.out = e.end()
	} else {
		c.out = appendReservation(c.out[:0], &r)
	}
	writeReply(ctx, f, c.out)
}

// POST /v1/release {"hold", "copies"} → {"released": N, "held": M}. copies
// defaults to 1.
func (s *Server) release(ctx *fasthttp.RequestCtx, _ params) {
	c := getCall()
	defer putCall(c)
	if !s.decodeBody(ctx, c, releaseFields, fHold) {
		return
	}
	copies, _ := c.body.counts()
	g := s.gen.Load()
	hold := string(c.body.hold)
	resource, _ := g.engine.HoldResource(hold) // for the metrics: a hold's resource never changes
	released, held, err := g.engine.Release(s.now(), hold, copies)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	g.countHoldOp(resource, opRelease)
	f := replyFormat(ctx)
	if f == formatMsgpack {
		e := &c.body.codec().e
		e.begin(c.out[:0])
		e.mapLen(2)
		e.intField("released", int64(released))
		e.intField("held", int64(held))
		c.out = e.end()
	} else {
		c.out = append(c.out[:0], '{')
		c.out = appendIntField(c.out, "released", int64(released))
		c.out = appendIntField(c.out, "held", int64(held))
		c.out = append(c.out, '}')
	}
	writeReply(ctx, f, c.out)
}

// POST /v1/transfer {"hold", "copies", "ttl_ms"} → {"transfer": id}. copies
// defaults to 1, ttl_ms to 30000.
func (s *Server) transfer(ctx *fasthttp.RequestCtx, _ params) {
	c := getCall()
	defer putCall(c)
	if !s.decodeBody(ctx, c, transferFields, fHold) {
		return
	}
	copies, _ := c.body.counts()
	g := s.gen.Load()
	hold := string(c.body.hold)
	resource, _ := g.engine.HoldResource(hold)
	id, err := g.engine.Transfer(s.now(), hold, copies,
		time.Duration(c.body.ttl())*time.Millisecond)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	g.countHoldOp(resource, opTransfer)
	f := replyFormat(ctx)
	if f == formatMsgpack {
		e := &c.body.codec().e
		e.begin(c.out[:0])
		e.mapLen(1)
		e.strField("transfer", id)
		c.out = e.end()
	} else {
		c.out = append(c.out[:0], '{')
		c.out = appendStringField(c.out, "transfer", id)
		c.out = append(c.out, '}')
	}
	writeReply(ctx, f, c.out)
}

// POST /v1/seize {"transfer", "session"} → {"hold", "resource", "domain",
// "groups", "copies"}.
func (s *Server) seize(ctx *fasthttp.RequestCtx, _ params) {
	c := getCall()
	defer putCall(c)
	if !s.decodeBody(ctx, c, seizeFields, fTransfer|fSession) {
		return
	}
	g := s.gen.Load()
	r, err := g.engine.Seize(s.now(), string(c.body.transfer), string(c.body.session))
	if err != nil {
		s.fail(ctx, err)
		return
	}
	g.countHoldOp(r.Resource, opSeize)
	f := replyFormat(ctx)
	if f == formatMsgpack {
		e := &c.body.codec().e
		e.begin(c.out[:0])
		e.seized(&r)
		c.out = e.end()
	} else {
		c.out = appendSeized(c.out[:0], &r)
	}
	writeReply(ctx, f, c.out)
}

// writeSession writes the reply of opening or renewing a session.
func (s *Server) writeSession(ctx *fasthttp.RequestCtx, c *call, id string, ttlMs int64) {
	f := replyFormat(ctx)
	if f == formatMsgpack {
		e := &c.body.codec().e
		e.begin(c.out[:0])
		e.mapLen(2)
		e.strField("session", id)
		e.intField("ttl_ms", ttlMs)
		c.out = e.end()
	} else {
		c.out = appendSession(c.out[:0], id, ttlMs)
	}
	writeReply(ctx, f, c.out)
}
