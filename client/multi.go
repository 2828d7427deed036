package client

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Need is one resource of a Multi or Batch call.
type Need struct {
	Resource string
	Domain   string
	// Copies asked; 0 means 1.
	Copies int
	// MinCopies is the least grant accepted; 0 means Copies (all or
	// nothing).
	MinCopies int
	// Limit is the limit set by the request (WithLimit); the zero Limit
	// is none. Batch sends it; Multi's reservations take none.
	Limit Limit
}

// opts returns the call options of n.
func (n Need) opts() []Option {
	copies := n.Copies
	if copies == 0 {
		copies = 1
	}
	minCopies := n.MinCopies
	if minCopies == 0 {
		minCopies = copies
	}
	return []Option{Copies(copies), MinCopies(minCopies), WithLimit(n.Limit)}
}

// MultiRequest is what Multi asks for: copies of copy-limited resources and
// at most one rate-limited resource.
type MultiRequest struct {
	// Reserve are the copy-limited resources, reserved in this order.
	Reserve []Need
	// Request is the rate-limited resource, asked last (a rate grant
	// cannot be taken back); nil for none.
	Request *Need
}

// MultiResult is the outcome of Multi.
type MultiResult struct {
	// Granted is true when every part was granted.
	Granted bool
	// Holds are the holds of MultiRequest.Reserve, in order, when Granted.
	Holds []*Hold
	// Decision is the decision of MultiRequest.Request (zero when there is
	// none, or when a reservation failed first).
	Decision Decision
	// RejectedBy is the resource whose rejection failed the last attempt;
	// "" when Granted.
	RejectedBy string
	// Degraded and Killed are true when some part was.
	Degraded, Killed bool
	// Retries is how many times MaxWait tried the whole call again.
	Retries int
}

// Release releases every hold of the result; it is idempotent.
func (r *MultiResult) Release() error {
	var errs []error
	for _, h := range r.Holds {
		errs = append(errs, h.Release())
	}
	return errors.Join(errs...)
}

// Multi is Charon's pseudo-atomic multi-resource request, as one call: it
// reserves the copy-limited resources first, in order, then asks for the
// rate-limited one last; if any part is rejected (or fails), the holds
// already taken are released and the result is not Granted. With MaxWait
// (the only option Multi takes) the whole call is tried again, with
// backoff, until granted or the wait is spent; a rejection of the rate
// part waits at least its retry_after.
//
// Degraded and killed parts count as granted (each as Reserve and Request
// say). The error is a client error of some part (after the rollback), or
// ctx.Err().
func (c *Client) Multi(ctx context.Context, req MultiRequest, opts ...Option) (*MultiResult, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	o, err := makeOptions(opts)
	if err == nil && (o.copies != 1 || o.minCopies != 1) {
		err = fmt.Errorf("%w: Multi takes MaxWait only; give copies per Need", ErrBadRequest)
	}
	if err != nil {
		return nil, c.fail(err)
	}
	res := &MultiResult{}
	res.Retries, err = c.retry(ctx, &o, func() (bool, time.Duration, error) {
		*res = MultiResult{}
		retryAfter, err := c.multiOnce(ctx, &req, res)
		return res.Granted, retryAfter, err
	})
	if err != nil {
		return nil, err // counted by the part that failed
	}
	return res, nil
}

// multiOnce makes one attempt of Multi into res; it returns the rate
// part's retry after when that part rejected.
func (c *Client) multiOnce(ctx context.Context, req *MultiRequest, res *MultiResult) (time.Duration, error) {
	holds := make([]*Hold, 0, len(req.Reserve))
	rollback := func() {
		for _, h := range holds {
			_ = h.Release()
		}
	}
	for _, n := range req.Reserve {
		h, err := c.Reserve(ctx, n.Resource, n.Domain, n.opts()...)
		if err != nil {
			rollback()
			return 0, err
		}
		res.Degraded = res.Degraded || h.Degraded
		res.Killed = res.Killed || h.Killed
		if h.Granted == 0 {
			rollback()
			res.RejectedBy = n.Resource
			return 0, nil
		}
		holds = append(holds, h)
	}
	if n := req.Request; n != nil {
		d, err := c.Request(ctx, n.Resource, n.Domain, n.opts()...)
		if err != nil {
			rollback()
			return 0, err
		}
		res.Decision = d
		res.Degraded = res.Degraded || d.Degraded
		res.Killed = res.Killed || d.Killed
		if d.Granted == 0 {
			rollback()
			res.RejectedBy = n.Resource
			return d.RetryAfter, nil
		}
	}
	res.Granted, res.Holds = true, holds
	return 0, nil
}
