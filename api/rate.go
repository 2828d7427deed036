package api

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/local"
)

// POST /v1/request {"resource", "domain", "copies", "min_copies"} → a rate
// decision. This is the hot path: the body (JSON or MessagePack) is decoded
// into a pooled struct and the reply (JSON or MessagePack, as Accept asks)
// appended into a pooled buffer.
func (s *Server) request(ctx *fasthttp.RequestCtx, _ params) {
	start := time.Now()
	c := getCall()
	defer putCall(c)
	if !s.decodeBody(ctx, c, requestFields, fResource|fDomain) {
		return
	}
	copies, minCopies := c.body.counts()
	g := s.gen.Load()
	var d local.Decision
	resource := g.name(c.body.resource)
	if err := g.engine.Decide(&d, s.decisionTime(start), resource, string(c.body.domain), copies, minCopies); err != nil {
		s.fail(ctx, err)
		return
	}
	f := replyFormat(ctx)
	if f == formatMsgpack {
		e := &c.body.codec().e
		e.begin(c.out[:0])
		e.decision(&d)
		c.out = e.end()
	} else {
		c.out = appendDecision(c.out[:0], &d)
	}
	writeReply(ctx, f, c.out)
	g.observe(resource, c.body.domain, copies, &d, start)
}

// POST /v1/refund {"resource", "domain", "copies"} → {"remaining": N} (gcra).
func (s *Server) refund(ctx *fasthttp.RequestCtx, _ params) {
	c := getCall()
	defer putCall(c)
	if !s.decodeBody(ctx, c, refundFields, fResource|fDomain) {
		return
	}
	copies, _ := c.body.counts()
	g := s.gen.Load()
	remaining, err := g.engine.Refund(s.now(), g.name(c.body.resource), string(c.body.domain), copies)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	f := replyFormat(ctx)
	if f == formatMsgpack {
		e := &c.body.codec().e
		e.begin(c.out[:0])
		e.mapLen(1)
		e.intField("remaining", int64(remaining))
		c.out = e.end()
	} else {
		c.out = appendRefund(c.out[:0], remaining)
	}
	writeReply(ctx, f, c.out)
}

// Header names of /v1/check, set as given (fasthttp would otherwise
// normalize "RateLimit" to "Ratelimit").
var (
	hdrPolicy       = []byte("RateLimit-Policy")
	hdrRateLimit    = []byte("RateLimit")
	hdrRetryAfter   = []byte("Retry-After")
	hdrObolResource = "Obol-Resource"
	hdrObolDomain   = "Obol-Domain"
)

// GET /v1/check?resource=R&domain=D[&copies=N] → one rate decision for an
// HTTP proxy. The resource and domain may come from the headers Obol-Resource
// and Obol-Domain instead (a query parameter wins over its header). Reply:
// 204 when granted (a peek, copies=0, when a request of one would be
// granted now), else 429 with Retry-After in whole seconds, rounded up, at
// least 1 (none when no wait would do) and the decision as body (JSON, or
// MessagePack when Accept asks for it).
// Both carry the IETF RateLimit-Policy and RateLimit fields (see
// rateLimitHeaders). Errors are the usual error replies.
func (s *Server) check(ctx *fasthttp.RequestCtx, _ params) {
	start := time.Now()
	c := getCall()
	defer putCall(c)
	b := &c.body
	err := b.readQuery(ctx.QueryArgs(), fResource|fDomain|fCopies)
	if err == nil && !b.has(fResource) {
		b.resource, err = checkHeader(ctx, hdrObolResource, "resource")
		b.seen |= fResource
	}
	if err == nil && !b.has(fDomain) {
		b.domain, err = checkHeader(ctx, hdrObolDomain, "domain")
		b.seen |= fDomain
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	copies, minCopies := b.counts()
	g := s.gen.Load()
	resource, domain := g.name(b.resource), string(b.domain)
	var d local.Decision
	if err := g.engine.Decide(&d, s.decisionTime(start), resource, domain, copies, minCopies); err != nil {
		s.fail(ctx, err)
		return
	}
	defer g.observe(resource, b.domain, copies, &d, start)
	c.out = rateLimitHeaders(ctx, c.out[:0], g, resource, domain, &d)
	if d.Granted > 0 || (copies == 0 && d.RetryAfter == 0) {
		ctx.SetStatusCode(fasthttp.StatusNoContent)
		return
	}
	if d.RetryAfter != local.Never {
		n := len(c.out)
		c.out = strconv.AppendInt(c.out, max(1, ceilSec(d.RetryAfter)), 10)
		ctx.Response.Header.SetCanonical(hdrRetryAfter, c.out[n:])
	}
	n := len(c.out)
	f := replyFormat(ctx)
	if f == formatMsgpack {
		e := &c.body.codec().e
		e.begin(c.out)
		e.decision(&d)
		c.out = e.end()
	} else {
		c.out = appendDecision(c.out, &d)
	}
	ctx.SetStatusCode(fasthttp.StatusTooManyRequests)
	ctx.SetContentType(contentTypes[f])
	ctx.SetBody(c.out[n:])
}

// checkHeader returns the value of header h for field, which is required.
func checkHeader(ctx *fasthttp.RequestCtx, h, field string) ([]byte, error) {
	v := ctx.Request.Header.Peek(h)
	if v == nil {
		return nil, &fieldError{field: field, msg: "required: give the query parameter " + field + " or the header " + h}
	}
	return v, checkName(field, v)
}

// rateLimitHeaders sets the IETF RateLimit fields of a decision, in their
// structured-field form, using buf as scratch (and returning it):
//
//	RateLimit-Policy: "<resource>";q=<limit>;w=<window s>
//	RateLimit: "<resource>";r=<remaining>;t=<s until reset>
//
// q and w are the current tier's limit and window, or the first tier's in
// tier 0 (q=0 when there is no tier), or the gcra burst and period; seconds
// are rounded up and w is at least 1. A lenient decision (no limit applied)
// and a kind without rate fields get neither field.
func rateLimitHeaders(ctx *fasthttp.RequestCtx, buf []byte, g *generation, resource, domain string, d *local.Decision) []byte {
	q, w, ok := policy(g.engine.Config(), resource, domain, d)
	if !ok {
		return buf
	}
	start := len(buf)
	buf = appendSFString(buf, resource)
	buf = append(buf, ";q="...)
	buf = strconv.AppendInt(buf, q, 10)
	buf = append(buf, ";w="...)
	buf = strconv.AppendInt(buf, w, 10)
	ctx.Response.Header.SetCanonical(hdrPolicy, buf[start:])
	start = len(buf)
	buf = appendSFString(buf, resource)
	buf = append(buf, ";r="...)
	buf = strconv.AppendInt(buf, int64(max(d.Remaining, 0)), 10)
	buf = append(buf, ";t="...)
	buf = strconv.AppendInt(buf, ceilSec(d.ResetAfter), 10)
	ctx.Response.Header.SetCanonical(hdrRateLimit, buf[start:])
	return buf
}

// policy returns the quota q and window w (seconds) of a decision's policy.
func policy(cfg *config.Config, resource, domain string, d *local.Decision) (q, w int64, ok bool) {
	if d.Lenient {
		return 0, 0, false
	}
	switch d.Kind {
	case config.KindGCRA:
		return int64(d.GCRABurst), max(1, ceilSec(d.GCRAPeriod)), true
	case config.KindTiers:
		if d.Tier >= 1 {
			return int64(d.TierLimit), max(1, ceilSec(d.TierWindow)), true
		}
		if t, ok := firstTier(cfg, resource, domain); ok {
			return int64(t.Limit), max(1, ceilSec(t.Window)), true
		}
		return 0, 1, true
	}
	return 0, 0, false
}

// firstTier returns tier 1 of the domain's config (its override's when it has one).
func firstTier(cfg *config.Config, resource, domain string) (config.Tier, bool) {
	if cfg == nil {
		return config.Tier{}, false
	}
	res := cfg.Resources[resource]
	if res == nil {
		return config.Tier{}, false
	}
	tiers := res.Tiers
	if ov := res.Domains[domain]; ov != nil {
		tiers = ov.Tiers
	}
	if len(tiers) == 0 {
		return config.Tier{}, false
	}
	return tiers[0], true
}

// appendSFString appends s as a structured-field string (RFC 8941): '"' and
// '\' are escaped; bytes outside printable ASCII, which an sf-string cannot
// hold, are percent-encoded.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '%', "0123456789ABCDEF"[c>>4], "0123456789ABCDEF"[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
