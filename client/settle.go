package client

import (
	"context"
	"fmt"

	"github.com/obol-dev/obol/internal/wire/replies"
)

// Settlement is what Settle did: Charged is the real cost less the
// estimate (negative: given back), Remaining what a request of the key
// could get now. Degraded: the agent could not be asked, and nothing was
// charged (fail open, as for a decision).
type Settlement struct {
	Charged   int
	Remaining int
	Degraded  bool
}

// Settle charges the real cost, copies, of a grant asked with SettleLater,
// in place of its estimate: less gives the difference back, more charges
// it past the limit (later requests wait it out), once. An empty ticket (a
// degraded, killed or rejected decision) settles nothing: a zero
// Settlement. The error is for client errors only: an *APIError matching
// ErrUnknownTicket, ErrAlreadySettled or ErrBadRequest, or a bad argument.
func (c *Client) Settle(ctx context.Context, ticket string, copies int) (Settlement, error) {
	if c.closed.Load() {
		return Settlement{}, ErrClosed
	}
	if ticket == "" {
		return Settlement{}, nil
	}
	if copies < 0 || copies > maxCopies {
		return Settlement{}, c.fail(fmt.Errorf("%w: copies: must be in [0, %d], got %d", ErrBadRequest, maxCopies, copies))
	}
	k := getCall()
	defer putCall(k)
	k.buf = append(k.buf, '{')
	k.buf = appendStringField(k.buf, "ticket", ticket)
	k.buf = appendIntField(k.buf, "copies", int64(copies))
	k.buf = append(k.buf, '}')
	err := c.post(ctx, k, epSettle)
	var st Settlement
	if err == nil {
		charged, cerr := replies.ReadInt(k.resp.Body(), "charged")
		remaining, rerr := replies.ReadInt(k.resp.Body(), replies.NameRemaining)
		if cerr != nil || rerr != nil {
			err = &agentError{errMalformed}
		}
		st = Settlement{Charged: int(charged), Remaining: int(remaining)}
	}
	if isAgentError(err) {
		c.degrade(err, 1)
		return Settlement{Degraded: true}, nil
	}
	if err != nil {
		return Settlement{}, c.fail(err)
	}
	return st, nil
}

// Reset forgets resource's counts for domain (kinds tiers and gcra) on the
// agent and, through its mesh, on every agent: a support team unblocking a
// customer. Unlike a decision it does not fail open: an agent that cannot
// be asked, or a reply other than {"reset": true}, is an error, since the
// reset may not have happened.
func (c *Client) Reset(ctx context.Context, resource, domain string, opts ...Option) error {
	if c.closed.Load() {
		return ErrClosed
	}
	l, err := limitOnly("Reset", opts)
	if err == nil {
		err = checkNames(resource, domain)
	}
	if err != nil {
		return c.fail(err)
	}
	k := getCall()
	defer putCall(k)
	k.buf = append(k.buf, '{')
	k.buf = appendStringField(k.buf, "resource", resource)
	k.buf = appendStringField(k.buf, "domain", domain)
	k.buf = appendLimit(k.buf, l)
	k.buf = append(k.buf, '}')
	err = c.post(ctx, k, epReset)
	if err == nil {
		if done, rerr := replies.ReadBool(k.resp.Body(), "reset"); rerr != nil || !done {
			err = &agentError{errMalformed} // not the agent's reply: the reset may not have happened
		}
	}
	if isAgentError(err) {
		return fmt.Errorf("client: reset of %q for %q not made: %w", resource, domain, err)
	}
	if err != nil {
		return c.fail(err)
	}
	return nil
}
