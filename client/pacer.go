package client

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/obol-dev/obol/adaptive"
)

// The client pacer: a resource of kind pacer stands for a rate-limited API
// elsewhere that the application calls. Before each call the application
// asks the agent how long to wait (Pace), after it reports the reply
// (Observe); PacedTransport does both around every request of an
// http.Client. The agent keeps one pacer per resource, shared by every
// process that asks it: callers on one agent share the API's quota
// between them and with the callers of other agents, without knowing how
// many there are.

// Pace asks the agent how long to wait before the next call to the API
// the pacer resource stands for. The agent counts the call as made after
// that wait, so ask once per call and make the call then. An agent that
// is gone, hung or failing is not an error: the wait is 0 (the client
// fails open; counted in Stats.Degraded). Errors are client errors:
// ErrUnknownResource, ErrWrongKind (not a pacer), ErrBadRequest, ErrClosed,
// or ctx.Err().
func (c *Client) Pace(ctx context.Context, resource string) (time.Duration, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	if resource == "" {
		return 0, c.fail(fmt.Errorf("%w: resource: required, got \"\"", ErrBadRequest))
	}
	k := getCall()
	defer putCall(k)
	k.buf = append(k.buf[:0], '{')
	k.buf = appendStringField(k.buf, "resource", resource)
	k.buf = append(k.buf, '}')
	err := c.post(ctx, k, epPace)
	if err == nil {
		var ms int64
		if ms, err = decodeWait(k.resp.Body()); err == nil {
			return time.Duration(max(ms, 0)) * time.Millisecond, nil
		}
		err = &agentError{err}
	}
	if isAgentError(err) {
		c.stats.degraded.Add(1)
		if n, ok := c.degradedLog.allow(c.clock.Now(), c.logInterval, 1); ok {
			c.log.Warn("obol: agent unavailable; failing open (not pacing)", "err", err, "degraded", n)
		}
		return 0, nil
	}
	return 0, c.fail(err)
}

// PaceWait is Pace, then a sleep of the wait on the client's clock; it
// returns ctx.Err() when ctx ends first.
func (c *Client) PaceWait(ctx context.Context, resource string) error {
	d, err := c.Pace(ctx, resource)
	if err != nil || d <= 0 {
		return err
	}
	return c.clock.Sleep(ctx, d)
}

// Observe reports to the agent the reply to a paced call: its HTTP status
// (100 to 599; a 429 tells the pacer the quota is empty) and its headers,
// from which the remaining count is read as adaptive.Remaining reads it
// (the RateLimit field, then RateLimit-Remaining, then
// X-RateLimit-Remaining; header may be nil, and malformed values are
// skipped). An agent that is unavailable is not an error: the observation
// is dropped. Errors are client errors: ErrUnknownResource, ErrWrongKind,
// ErrBadRequest (a status out of range), ErrClosed, or ctx.Err().
func (c *Client) Observe(ctx context.Context, resource string, status int, header http.Header) error {
	if c.closed.Load() {
		return ErrClosed
	}
	switch {
	case resource == "":
		return c.fail(fmt.Errorf("%w: resource: required, got \"\"", ErrBadRequest))
	case status < 100 || status > 599:
		return c.fail(fmt.Errorf("%w: status: must be an HTTP status code in [100, 599], got %d", ErrBadRequest, status))
	}
	k := getCall()
	defer putCall(k)
	k.buf = append(k.buf[:0], '{')
	k.buf = appendStringField(k.buf, "resource", resource)
	k.buf = appendIntField(k.buf, "status", int64(status))
	if n, ok := adaptive.Remaining(header); ok {
		k.buf = appendIntField(k.buf, "remaining", int64(n))
	}
	k.buf = append(k.buf, '}')
	err := c.post(ctx, k, epObserve)
	if err == nil || isAgentError(err) {
		return nil
	}
	return c.fail(err)
}

// PacedTransport returns an http.RoundTripper that paces every request it
// sends through the agent's pacer resource: it waits as PaceWait says (or
// until the request's context ends), sends the request with base
// (http.DefaultTransport when nil) and reports the reply's status and
// headers with Observe, whose failure never fails the request. A client
// error of Pace (an unknown resource, the wrong kind) fails the request
// before it is sent. It is safe for concurrent use.
func (c *Client) PacedTransport(resource string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &pacedTransport{c: c, resource: resource, base: base}
}

type pacedTransport struct {
	c        *Client
	resource string
	base     http.RoundTripper
}

func (t *pacedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := t.c.PaceWait(ctx, t.resource); err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even on errors
		}
		return nil, err
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	// The call was made: report it even if the caller's context ends now.
	_ = t.c.Observe(context.WithoutCancel(ctx), t.resource, resp.StatusCode, resp.Header)
	return resp, nil
}
