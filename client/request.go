package client

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Never is the RetryAfter of a rejection no wait would let through (the
// agent's retry_after_ms of -1).
const Never = time.Duration(-1)

// Decision is the outcome of a rate decision (Request, Check, a Batch item).
// A rejection is a Decision with Granted 0 and a nil error.
type Decision struct {
	// Granted is how many copies were granted: 0 is a rejection.
	Granted int
	// Remaining is the most a request at the same instant could now get.
	Remaining int
	// RetryAfter is the least wait after which a request of
	// max(min_copies, 1) would be granted, assuming no other traffic: 0 when
	// it would be now, Never when it never would.
	RetryAfter time.Duration
	// Degraded is true when the agent could not be asked (unreachable,
	// timed out, 5xx): the client failed open and granted min_copies. Reply
	// is then zero.
	Degraded bool
	// Killed is true when the kill switch turned a rejection into a grant
	// of every copy asked; Reply is the agent's rejection.
	Killed bool
	// Shadow is true when the agent granted what its limit rejects,
	// because the resource is in shadow mode.
	Shadow bool
	// Retries is how many times MaxWait sent the request again.
	Retries int
	// Ticket is the settle ticket of a grant asked with SettleLater (Reply's
	// too): Client.Settle takes it with the real cost. "" for a rejection,
	// a degraded or killed grant, and without SettleLater.
	Ticket string
	// RateLimitPolicy and RateLimit are the IETF RateLimit fields of the
	// decision as the agent wrote them (`"t1";q=5;w=1, "t2";q=50;w=5`,
	// `"t1";r=4;t=1`); only Check sets them, and only when the agent sent
	// them.
	RateLimitPolicy, RateLimit string
	// RateLimitWindow is the RateLimit field's t (Check only): the
	// effective window of the policy closest to its limit, the time within
	// which no more than its r (on a grant, Remaining) can be used under
	// it. It is not when the quota is full again, and it never points past
	// RetryAfter. 0 when the field has no t (that policy never refills, or
	// the agent sent no field).
	RateLimitWindow time.Duration
	// Reply is the agent's reply, every field.
	Reply Reply
}

// NoLimit is the value of a limit field (Reply.HardLimit, GlobalLimit,
// ReserveReply.DomainLimit, GlobalLimit, GroupHolds.Limit) when the agent
// reports no such limit. A limit of 0 is a real limit that grants nothing.
const NoLimit = -1

// Reply is the agent's reply to a rate decision, field by field (docs/api.md,
// docs/semantics.md). Fields that do not apply to the resource's kind are zero.
type Reply struct {
	Granted      int
	Remaining    int
	RetryAfterMs int64 // -1: never
	ResetAfterMs int64
	// kind tiers
	Tier                 int
	TierLimit            int
	TierHits             int
	Burst                bool
	HardLimit            int // NoLimit when the domain has none (the reply omits it)
	GlobalLimit          int // NoLimit when the resource has none
	DomainHitsLastSecond int
	GlobalHitsLastSecond int
	LimitedByHard        bool
	LimitedByGlobal      bool
	// Shadow: a rejection granted by shadow mode.
	Shadow bool
	// Lenient: a grant made without a limit (an unconfigured resource in a
	// namespace that allows it, an ignored namespace, max_keys reached).
	Lenient bool
	// Ticket is the settle ticket of a grant asked with SettleLater, for
	// Client.Settle; "" otherwise.
	Ticket string
}

// fromReply sets d's summary fields from d.Reply.
func (d *Decision) fromReply() {
	d.Ticket = d.Reply.Ticket
	d.Granted = d.Reply.Granted
	d.Remaining = d.Reply.Remaining
	d.Shadow = d.Reply.Shadow
	if d.Reply.RetryAfterMs < 0 {
		d.RetryAfter = Never
	} else {
		d.RetryAfter = time.Duration(d.Reply.RetryAfterMs) * time.Millisecond
	}
}

// Request asks for a rate decision (kinds tiers and gcra) on resource for
// domain: Copies (default 1), of which at least MinCopies (default all).
// With MaxWait it retries a rejection until granted or the wait is spent.
//
// The error is for client errors only: an *APIError (matching
// ErrUnknownResource, ErrWrongKind, ErrCostOverBurst, ErrBadRequest, …) or a
// bad argument (ErrBadRequest), or ctx.Err() when ctx ends first (the
// Decision then holds the last rejection). An agent that is gone, hung or
// failing is not an error: the Decision is Degraded and grants MinCopies.
// With the kill switch on, a rejection comes back as a grant of every copy
// asked, marked Killed (a peek, Copies(0), is never changed).
func (c *Client) Request(ctx context.Context, resource, domain string, opts ...Option) (Decision, error) {
	var d Decision
	o, err := c.begin(resource, domain, opts)
	if err != nil {
		return d, c.fail(err)
	}
	d.Retries, err = c.retry(ctx, &o, func() (bool, time.Duration, error) {
		err := c.requestOnce(ctx, resource, domain, &o, &d)
		return d.Granted > 0 || o.copies == 0, d.RetryAfter, err
	})
	return d, c.settle(&d, &o, resource, domain, err)
}

// begin checks a decision's arguments, counts the call and returns its
// options.
func (c *Client) begin(resource, domain string, opts []Option) (options, error) {
	if c.closed.Load() {
		return options{}, ErrClosed
	}
	o, err := makeOptions(opts)
	if err == nil {
		err = checkNames(resource, domain)
	}
	c.stats.calls.Add(1)
	return o, err
}

// requestOnce sends one /v1/request into d.
func (c *Client) requestOnce(ctx context.Context, resource, domain string, o *options, d *Decision) error {
	k := getCall()
	defer putCall(k)
	if o.settle {
		k.buf = appendSettleRequest(k.buf, resource, domain, o.copies, o.minCopies, o.limit)
	} else {
		k.buf = appendRequest(k.buf, resource, domain, o.copies, o.minCopies, o.limit)
	}
	if err := c.post(ctx, k, epRequest); err != nil {
		return err
	}
	if err := decodeDecision(k.resp.Body(), &d.Reply); err != nil {
		return &agentError{err}
	}
	d.fromReply()
	return nil
}

// settle finishes a decision: a degraded grant when the agent failed, a
// killed grant for a rejection under the kill switch, else d as it is; it
// returns the error for the caller.
func (c *Client) settle(d *Decision, o *options, resource, domain string, err error) error {
	switch {
	case err == nil:
		if d.Granted == 0 && o.copies > 0 && c.kill.Load() {
			d.Granted, d.RetryAfter, d.Killed = o.copies, 0, true
			c.killed(resource, domain)
		}
		return nil
	case isAgentError(err):
		retries := d.Retries
		*d = Decision{Granted: o.minCopies, Degraded: true, Retries: retries}
		c.degrade(err, 1)
		return nil
	}
	return c.fail(err)
}

// Check asks for a rate decision as an HTTP proxy does (GET /v1/check): it
// is Request with the IETF RateLimit fields of the decision added
// (Decision.RateLimitPolicy, RateLimit and RateLimitWindow), for a
// middleware to forward. The endpoint grants all or nothing: MinCopies
// must be left out (or equal Copies). A grant has no reply body: its Reply
// holds only Granted and Remaining, which is the RateLimit field's r, what
// is left under the policy closest to its limit (a request may be granted
// more, when the resource's tiers let a domain burst); a rejection's Reply
// is the agent's whole reply.
func (c *Client) Check(ctx context.Context, resource, domain string, opts ...Option) (Decision, error) {
	var d Decision
	o, err := c.begin(resource, domain, opts)
	if err == nil && o.minCopies != o.copies {
		err = fmt.Errorf("%w: min_copies: Check grants all or nothing; want %d (copies), got %d", ErrBadRequest, o.copies, o.minCopies)
	}
	if err == nil && o.limit.json != "" {
		err = fmt.Errorf("%w: Check takes no limit (GET /v1/check has no body); use Request", ErrBadRequest)
	}
	if err != nil {
		return d, c.fail(err)
	}
	d.Retries, err = c.retry(ctx, &o, func() (bool, time.Duration, error) {
		err := c.checkOnce(ctx, resource, domain, &o, &d)
		return d.Granted > 0 || o.copies == 0, d.RetryAfter, err
	})
	return d, c.settle(&d, &o, resource, domain, err)
}

var (
	hdrPolicy    = []byte("RateLimit-Policy")
	hdrRateLimit = []byte("RateLimit")
)

// checkOnce sends one GET /v1/check into d.
func (c *Client) checkOnce(ctx context.Context, resource, domain string, o *options, d *Decision) error {
	k := getCall()
	defer putCall(k)
	k.check = true
	k.buf = append(k.buf, c.base...)
	k.buf = append(k.buf, "/v1/check?resource="...)
	k.buf = appendQuery(k.buf, resource)
	k.buf = append(k.buf, "&domain="...)
	k.buf = appendQuery(k.buf, domain)
	k.buf = append(k.buf, "&copies="...)
	k.buf = strconv.AppendInt(k.buf, int64(o.copies), 10)
	k.req.Header.SetMethod("GET")
	k.req.SetRequestURIBytes(k.buf)
	if err := c.do(ctx, k); err != nil {
		return err
	}
	*d = Decision{Retries: d.Retries, Reply: Reply{HardLimit: NoLimit, GlobalLimit: NoLimit}}
	if v := k.resp.Header.PeekBytes(hdrPolicy); len(v) > 0 {
		d.RateLimitPolicy = string(v)
	}
	if v := k.resp.Header.PeekBytes(hdrRateLimit); len(v) > 0 {
		d.RateLimit = string(v)
	}
	if t, ok := sfParam(d.RateLimit, 't'); ok && t >= 0 {
		d.RateLimitWindow = time.Duration(t) * time.Second
	}
	if k.resp.StatusCode() == 429 {
		if err := decodeDecision(k.resp.Body(), &d.Reply); err != nil {
			return &agentError{err}
		}
		d.fromReply()
		return nil
	}
	// 204: granted (or, for a peek, would be).
	if o.copies > 0 {
		d.Reply.Granted = o.copies
	}
	if r, ok := sfParam(d.RateLimit, 'r'); ok && r >= 0 {
		d.Reply.Remaining = int(min(r, maxCopies))
	}
	d.fromReply()
	return nil
}

// sfParam returns the integer parameter name of the first member of a
// RateLimit field value, a structured-field list (RFC 9651) such as
// `"t1";r=4;t=1`: a string or token item, then parameters whose values
// are integers, strings or tokens. A malformed member, or a name whose
// value is not an integer, gives false (the draft says to ignore a
// malformed field).
func sfParam(v string, name byte) (int64, bool) {
	p := sfReader{s: v}
	for p.peek() == ' ' {
		p.i++
	}
	if !p.bareString() {
		return 0, false
	}
	var val int64
	found := false
	for p.peek() == ';' {
		p.i++
		for p.peek() == ' ' {
			p.i++
		}
		k := p.i
		for c := p.peek(); c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*'; c = p.peek() {
			p.i++
		}
		key := v[k:p.i]
		if key == "" || key[0] >= '0' && key[0] <= '9' || key[0] == '_' || key[0] == '-' || key[0] == '.' || p.peek() != '=' {
			return 0, false
		}
		p.i++
		if c := p.peek(); c == '-' || c >= '0' && c <= '9' {
			n, ok := p.integer()
			if !ok {
				return 0, false
			}
			if len(key) == 1 && key[0] == name {
				val, found = n, true // the last one wins, as RFC 9651 says
			}
			continue
		}
		if !p.bareString() || len(key) == 1 && key[0] == name {
			return 0, false
		}
	}
	if c := p.peek(); c != 0 && c != ',' && c != ' ' && c != '\t' {
		return 0, false
	}
	return val, found
}

// sfReader reads a structured-field value byte by byte.
type sfReader struct {
	s string
	i int
}

// peek returns the next byte, or 0 at the end.
func (r *sfReader) peek() byte {
	if r.i < len(r.s) {
		return r.s[r.i]
	}
	return 0
}

// bareString reads an sf-string (printable ASCII, \" and \\ escapes) or an
// sf-token, and reports whether there was a well-formed one.
func (r *sfReader) bareString() bool {
	switch c := r.peek(); {
	case c == '"':
		for r.i++; ; r.i++ {
			switch c := r.peek(); {
			case c == '\\':
				r.i++
				if c := r.peek(); c != '"' && c != '\\' {
					return false
				}
			case c == '"':
				r.i++
				return true
			case c < 0x20 || c > 0x7e: // the end (0) included
				return false
			}
		}
	case c == '*' || c|0x20 >= 'a' && c|0x20 <= 'z':
		for r.i++; isTokenByte(r.peek()); r.i++ {
		}
		return true
	}
	return false
}

// integer reads an sf-integer: an optional '-' and 1 to 15 digits.
func (r *sfReader) integer() (int64, bool) {
	start := r.i
	if r.peek() == '-' {
		r.i++
	}
	d := r.i
	for c := r.peek(); c >= '0' && c <= '9'; c = r.peek() {
		r.i++
	}
	if r.i == d || r.i-d > 15 || r.peek() == '.' {
		return 0, false
	}
	n, err := strconv.ParseInt(r.s[start:r.i], 10, 64)
	return n, err == nil
}

// isTokenByte reports whether c may follow the first character of an
// sf-token: tchar, ':' or '/'.
func isTokenByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	case c == 0:
		return false
	}
	for i := 0; i < len(tokenPunct); i++ {
		if c == tokenPunct[i] {
			return true
		}
	}
	return false
}

// tokenPunct are the punctuation bytes of an sf-token after its first.
const tokenPunct = "!#$%&'*+-.^_`|~:/"

// appendQuery appends s escaped for a query parameter value.
func appendQuery(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~', c == '/':
			b = append(b, c)
		default:
			b = append(b, '%', "0123456789ABCDEF"[c>>4], "0123456789ABCDEF"[c&0xf])
		}
	}
	return b
}

// Refund gives copies tokens back to a gcra bucket (they are refilled at
// once) and returns the tokens remaining. A degraded refund (agent
// unavailable) is dropped: remaining is -1 and the error nil.
func (c *Client) Refund(ctx context.Context, resource, domain string, copies int, opts ...Option) (remaining int, err error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	l, err := limitOnly("Refund", opts)
	if err == nil {
		err = checkNames(resource, domain)
	}
	if err != nil {
		return 0, c.fail(err)
	}
	if copies < 0 || copies > maxCopies {
		return 0, c.fail(fmt.Errorf("%w: copies: must be in [0, %d], got %d", ErrBadRequest, maxCopies, copies))
	}
	k := getCall()
	defer putCall(k)
	k.buf = append(k.buf, '{')
	k.buf = appendStringField(k.buf, "resource", resource)
	k.buf = appendStringField(k.buf, "domain", domain)
	k.buf = appendIntField(k.buf, "copies", int64(copies))
	k.buf = appendLimit(k.buf, l)
	k.buf = append(k.buf, '}')
	err = c.post(ctx, k, epRefund)
	var n int64
	if err == nil {
		var derr error
		if n, derr = decodeRemaining(k.resp.Body()); derr != nil {
			err = &agentError{derr}
		}
	}
	if isAgentError(err) {
		c.degrade(err, 1)
		return -1, nil
	}
	if err != nil {
		return 0, c.fail(err)
	}
	return int(n), nil
}
