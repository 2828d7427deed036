package client

import (
	"context"
)

// Limits of one /v1/batch call; Batch splits a longer batch.
const (
	maxBatchItems = 1000
	maxBatchBody  = 64 << 10
)

// BatchResult is one item's outcome in a Batch: its Decision, or the error
// that refused it alone (an *APIError, or ErrBadRequest for bad arguments).
type BatchResult struct {
	Decision
	Err error
}

// Batch asks for many rate decisions in few calls (POST /v1/batch): each
// Need is decided on its own, in order, as if sent alone, and the results
// come back in the same order. A batch over the agent's limits (1000
// requests, 64 KiB) is sent in several calls.
//
// An item the agent refuses (unknown resource, wrong kind, …) has its Err
// set; the others are decided. When the agent is unavailable every item of
// the calls that failed is Degraded (granted its MinCopies); with the kill
// switch, rejected items are Killed grants. The error is for the whole
// batch: ctx.Err(), or a client error of a call (the results of the calls
// already made are then filled in, the rest left zero).
func (c *Client) Batch(ctx context.Context, needs []Need) ([]BatchResult, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	out := make([]BatchResult, len(needs))
	opts := make([]options, len(needs))
	send := make([]int, 0, len(needs)) // the items sent, by index
	for i, n := range needs {
		c.stats.calls.Add(1)
		o, err := makeOptions(n.opts())
		if err == nil {
			err = checkNames(n.Resource, n.Domain)
		}
		if err != nil {
			out[i].Err = c.fail(err)
			continue
		}
		opts[i] = o
		send = append(send, i)
	}
	k := getCall()
	defer putCall(k)
	var scratch []BatchResult
	for len(send) > 0 {
		// Fill one call: as many items as fit.
		k.buf = append(k.buf[:0], `{"requests":[`...)
		n := 0
		for n < len(send) && n < maxBatchItems {
			i := send[n]
			mark := len(k.buf)
			if n > 0 {
				k.buf = append(k.buf, ',')
			}
			k.buf = appendRequest(k.buf, needs[i].Resource, needs[i].Domain, opts[i].copies, opts[i].minCopies, opts[i].limit)
			if n > 0 && len(k.buf)+2 > maxBatchBody {
				k.buf = k.buf[:mark]
				break
			}
			n++
		}
		k.buf = append(k.buf, "]}"...)
		chunk := send[:n]
		send = send[n:]

		k.req.Reset()
		k.resp.Reset()
		err := c.post(ctx, k, epBatch)
		if err == nil {
			scratch = append(scratch[:0], make([]BatchResult, n)...)
			if derr := decodeBatch(k.resp.Body(), scratch); derr != nil {
				err = &agentError{derr}
			}
		}
		if isAgentError(err) {
			c.degrade(err, len(chunk))
			for _, i := range chunk {
				out[i].Decision = Decision{Granted: opts[i].minCopies, Degraded: true}
			}
			continue
		}
		if err != nil {
			return out, c.fail(err)
		}
		for j, i := range chunk {
			r := &out[i]
			*r = scratch[j]
			if r.Err != nil {
				c.fail(r.Err)
				continue
			}
			r.fromReply()
			if r.Granted == 0 && opts[i].copies > 0 && c.kill.Load() {
				r.Granted, r.RetryAfter, r.Killed = opts[i].copies, 0, true
				c.killed(needs[i].Resource, needs[i].Domain)
			}
		}
	}
	return out, nil
}
