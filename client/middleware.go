package client

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// KeyFunc names the resource and domain an HTTP request spends; ok false
// lets the request through without asking.
type KeyFunc func(r *http.Request) (resource, domain string, ok bool)

// FastKeyFunc is KeyFunc for fasthttp.
type FastKeyFunc func(ctx *fasthttp.RequestCtx) (resource, domain string, ok bool)

// Middleware returns net/http middleware that asks c for a decision per
// request (Check, with opts: Copies, MaxWait) on the resource and domain
// key names. A grant passes the request on; a rejection is answered 429 Too
// Many Requests with Retry-After (whole seconds, rounded up; left out when
// no wait would help). Both carry the IETF RateLimit-Policy and RateLimit
// fields when the agent gives them. Degraded and killed decisions pass. A
// client error (say an unknown resource: a config mistake) passes too, and
// is logged at most once per the client's LogInterval: a limiter must not
// take the service down.
func Middleware(c *Client, key KeyFunc, opts ...Option) func(http.Handler) http.Handler {
	mw := newMiddleware(c, opts)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			resource, domain, ok := key(r)
			if !ok {
				next.ServeHTTP(w, r)
				return
			}
			d, pass := mw.decide(r.Context(), resource, domain)
			h := w.Header()
			if d.RateLimitPolicy != "" {
				h.Set("RateLimit-Policy", d.RateLimitPolicy)
			}
			if d.RateLimit != "" {
				h.Set("RateLimit", d.RateLimit)
			}
			if pass {
				next.ServeHTTP(w, r)
				return
			}
			if s, ok := retryAfterSeconds(d.RetryAfter); ok {
				h.Set("Retry-After", strconv.FormatInt(s, 10))
			}
			http.Error(w, "429 too many requests", http.StatusTooManyRequests)
		})
	}
}

// FastHTTPMiddleware is Middleware for fasthttp handlers. The request's
// RequestCtx is the context of the decision.
func FastHTTPMiddleware(c *Client, key FastKeyFunc, opts ...Option) func(fasthttp.RequestHandler) fasthttp.RequestHandler {
	mw := newMiddleware(c, opts)
	return func(next fasthttp.RequestHandler) fasthttp.RequestHandler {
		return func(ctx *fasthttp.RequestCtx) {
			resource, domain, ok := key(ctx)
			if !ok {
				next(ctx)
				return
			}
			d, pass := mw.decide(ctx, resource, domain)
			h := &ctx.Response.Header
			if d.RateLimitPolicy != "" {
				h.SetCanonical(hdrPolicy, []byte(d.RateLimitPolicy))
			}
			if d.RateLimit != "" {
				h.SetCanonical(hdrRateLimit, []byte(d.RateLimit))
			}
			if pass {
				next(ctx)
				return
			}
			if s, ok := retryAfterSeconds(d.RetryAfter); ok {
				h.Set(fasthttp.HeaderRetryAfter, strconv.FormatInt(s, 10))
			}
			ctx.SetStatusCode(fasthttp.StatusTooManyRequests) // not ctx.Error: it drops the headers
			ctx.SetContentType("text/plain; charset=utf-8")
			ctx.SetBodyString("429 too many requests\n")
		}
	}
}

// middleware is the decision part shared by both middlewares.
type middleware struct {
	c    *Client
	opts []Option
	peek bool
	errs logLimiter
}

func newMiddleware(c *Client, opts []Option) *middleware {
	o, _ := makeOptions(opts) // a bad option fails each Check, which is logged
	return &middleware{c: c, opts: opts, peek: o.copies == 0}
}

// decide asks for a decision; pass says whether the request goes on.
func (m *middleware) decide(ctx context.Context, resource, domain string) (d Decision, pass bool) {
	d, err := m.c.Check(ctx, resource, domain, m.opts...)
	if err != nil {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			if n, ok := m.errs.allow(m.c.clock.Now(), m.c.logInterval, 1); ok {
				m.c.log.Error("obol: middleware cannot ask for a decision; letting requests through",
					"resource", resource, "err", err, "errors", n)
			}
		}
		return Decision{}, true
	}
	return d, d.Granted > 0 || d.Degraded || d.Killed || (m.peek && d.RetryAfter == 0)
}

// retryAfterSeconds renders a wait as Retry-After: whole seconds rounded up,
// at least 1; ok is false for Never.
func retryAfterSeconds(d time.Duration) (int64, bool) {
	if d < 0 {
		return 0, false
	}
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1), true
}
