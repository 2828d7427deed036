package api

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/obol-dev/obol/internal/wire"
	"github.com/obol-dev/obol/internal/wire/replies"
	"github.com/obol-dev/obol/local"
)

// Header names of /v1/check, set as given (fasthttp would otherwise
// normalize "RateLimit" to "Ratelimit").
var (
	hdrPolicy       = []byte("RateLimit-Policy")
	hdrRateLimit    = []byte("RateLimit")
	hdrRetryAfter   = []byte("Retry-After")
	hdrXLimit       = []byte("X-RateLimit-Limit")
	hdrXRemaining   = []byte("X-RateLimit-Remaining")
	hdrXReset       = []byte("X-RateLimit-Reset")
	hdrObolResource = "Obol-Resource"
	hdrObolDomain   = "Obol-Domain"
	hdrDenyStatus   = "Obol-Deny-Status"
	hdrHeaderForm   = "Obol-RateLimit-Headers"
)

// The status range deny_status accepts: a client or server error, which
// every proxy treats as a refusal (nginx auth_request passes 401 and 403 on
// and turns anything else but 2xx into a 500).
const (
	minDenyStatus = 400
	maxDenyStatus = 599
)

// headerForm is which RateLimit fields a /v1/check reply carries: the
// draft-11 pair (RateLimit-Policy, RateLimit), the draft-03 trio Envoy
// writes (X-RateLimit-Limit, -Remaining, -Reset), or both.
type headerForm uint8

const (
	formDraft11 headerForm = 1 << iota
	formDraft03
	formBoth = formDraft11 | formDraft03
)

// checkQuery is what a /v1/check request asks besides the decision: the
// status of a rejection and the form of the RateLimit fields.
type checkQuery struct {
	deny int
	form headerForm
}

// checkQueryNames are the query parameters /v1/check accepts, for messages.
const checkQueryNames = "resource, domain, copies, deny_status, headers"

// GET /v1/check?resource=R&domain=D[&copies=N][&deny_status=S][&headers=F]
// → one rate decision for an HTTP proxy.
//
// The resource may come from the header Obol-Resource instead, and the
// domain from Obol-Domain or, when Options.CheckDomainHeader names one,
// from the first element of that header (a comma-separated list such as
// X-Forwarded-For); a query parameter wins over Obol-Domain, which wins
// over the configured header. deny_status (or the header Obol-Deny-Status)
// is the status of a rejection, 400–599, default 429; headers (or
// Obol-RateLimit-Headers) is draft11 (default), draft03 or both.
//
// Reply: 204 when granted (a peek, copies=0, when a request of one would be
// granted now), else the deny status with Retry-After in whole seconds,
// rounded up, at least 1 (none when no wait would do) and the decision as
// body (JSON, or MessagePack when Accept asks for it). Both carry the
// RateLimit fields (setRateLimit says which). Errors are the usual error replies.
func (s *Server) check(ctx *fasthttp.RequestCtx, _ params) {
	start := handlerStart(ctx)
	c := getCall()
	defer putCall(c)
	b := &c.body
	q, err := readCheckQuery(b, ctx.QueryArgs())
	if err == nil && !b.has(fResource) {
		b.resource, err = checkHeader(ctx, hdrObolResource, "resource")
		b.seen |= fResource
	}
	if err == nil && !b.has(fDomain) {
		b.domain, err = s.checkDomain(ctx)
		b.seen |= fDomain
	}
	if err == nil {
		err = checkOptionHeaders(ctx, &q)
	}
	if err != nil {
		s.fail(ctx, err)
		return
	}
	copies, minCopies := b.counts()
	g := s.gen.Load()
	resource, rm := g.named(b.resource)
	domain := string(b.domain)
	var d local.Decision
	now := s.decisionTime(start)
	if err := g.engine.Decide(&d, now, resource, domain, copies, minCopies); err != nil {
		s.fail(ctx, err)
		return
	}
	defer g.observe(rm, resource, b.domain, copies, &d, now, start)
	if d.Granted > 0 || (copies == 0 && d.RetryAfter == 0) {
		c.out = setRateLimit(ctx, c.out[:0], g.policies.lookup(resource, domain), &d, q.form, 0)
		ctx.SetStatusCode(fasthttp.StatusNoContent)
		return
	}
	var retry int64 // Retry-After, s; 0 = none
	if d.RetryAfter != local.Never {
		retry = max(1, ceilSec(d.RetryAfter))
	}
	c.out = setRateLimit(ctx, c.out[:0], g.policies.lookup(resource, domain), &d, q.form, retry)
	if retry > 0 {
		n := len(c.out)
		c.out = strconv.AppendInt(c.out, retry, 10)
		ctx.Response.Header.SetCanonical(hdrRetryAfter, c.out[n:])
	}
	n := len(c.out)
	f := replyFormat(ctx)
	c.out = writeDecision(replies.NewWriter(f), c.out, &d)
	ctx.SetStatusCode(q.deny)
	ctx.SetContentType(contentTypes[f])
	ctx.SetBody(c.out[n:])
}

// readCheckQuery reads the query of /v1/check: resource, domain and copies
// into b (as readQuery does), deny_status and headers into the result (the
// defaults, 429 and draft11, when absent). Each at most once, no other.
func readCheckQuery(b *wireBody, args *fasthttp.Args) (checkQuery, error) {
	q := checkQuery{}
	for k, v := range args.All() {
		var err error
		switch string(k) {
		case "deny_status":
			if q.deny != 0 {
				return q, &fieldError{Field: "deny_status", Msg: "given twice"}
			}
			q.deny, err = denyStatus("deny_status", v)
		case "headers":
			if q.form != 0 {
				return q, &fieldError{Field: "headers", Msg: "given twice"}
			}
			q.form, err = parseHeaderForm("headers", v)
		default:
			f := fieldOf(k)
			if f&(fResource|fDomain|fCopies) == 0 {
				return q, &fieldError{Field: wire.Snippet(k), Msg: "unknown query parameter; expected one of " + checkQueryNames}
			}
			err = b.setQuery(f, v)
		}
		if err != nil {
			return q, err
		}
	}
	return q, nil
}

// checkOptionHeaders fills what the query left unset from the headers
// Obol-Deny-Status and Obol-RateLimit-Headers, then the defaults.
func checkOptionHeaders(ctx *fasthttp.RequestCtx, q *checkQuery) error {
	if q.deny == 0 {
		q.deny = fasthttp.StatusTooManyRequests
		if v := ctx.Request.Header.Peek(hdrDenyStatus); v != nil {
			var err error
			if q.deny, err = denyStatus(hdrDenyStatus, v); err != nil {
				return err
			}
		}
	}
	if q.form == 0 {
		q.form = formDraft11
		if v := ctx.Request.Header.Peek(hdrHeaderForm); v != nil {
			var err error
			if q.form, err = parseHeaderForm(hdrHeaderForm, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// denyStatus parses a deny status, an integer in [minDenyStatus,
// maxDenyStatus], given as field.
func denyStatus(field string, v []byte) (int, error) {
	n, err := queryInt(field, v, minDenyStatus, maxDenyStatus)
	if err != nil {
		return 0, &fieldError{Field: field, Msg: fmt.Sprintf("must be an HTTP status in [%d, %d] (e.g. 403 for nginx auth_request), got %s",
			minDenyStatus, maxDenyStatus, strconv.Quote(wire.Snippet(v)))}
	}
	return int(n), nil
}

// parseHeaderForm parses a RateLimit header form given as field.
func parseHeaderForm(field string, v []byte) (headerForm, error) {
	switch string(v) {
	case "draft11":
		return formDraft11, nil
	case "draft03":
		return formDraft03, nil
	case "both":
		return formBoth, nil
	}
	return 0, &fieldError{Field: field, Msg: `must be "draft11", "draft03" or "both", got ` + strconv.Quote(wire.Snippet(v))}
}

// checkHeader returns the value of header h for field, which is required.
func checkHeader(ctx *fasthttp.RequestCtx, h, field string) ([]byte, error) {
	v := ctx.Request.Header.Peek(h)
	if v == nil {
		return nil, &fieldError{Field: field, Msg: "required: give the query parameter " + field + " or the header " + h}
	}
	return v, checkName(field, v)
}

// checkDomain returns the domain of a /v1/check that has no domain query
// parameter: the header Obol-Domain, else the first element (trimmed of
// spaces and tabs) of the header Options.CheckDomainHeader names, when it
// names one.
func (s *Server) checkDomain(ctx *fasthttp.RequestCtx) ([]byte, error) {
	h := s.domainHeader
	if h == "" {
		return checkHeader(ctx, hdrObolDomain, "domain")
	}
	if v := ctx.Request.Header.Peek(hdrObolDomain); v != nil {
		return v, checkName("domain", v)
	}
	v := ctx.Request.Header.Peek(h)
	if v == nil {
		return nil, &fieldError{Field: "domain", Msg: "required: give the query parameter domain, the header " + hdrObolDomain + " or the header " + h}
	}
	first := v
	if i := bytes.IndexByte(first, ','); i >= 0 {
		first = first[:i]
	}
	first = bytes.Trim(first, " \t")
	if len(first) == 0 {
		return nil, &fieldError{Field: "domain", Msg: "the first element of the header " + h + " is empty, got " + strconv.Quote(wire.Snippet(v))}
	}
	return first, checkName("domain", first)
}
