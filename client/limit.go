package client

import (
	"fmt"
	"strconv"
	"time"
)

// Limit is a limit set by the request: the agent decides a resource its
// config does not define under this limit, in a namespace whose config
// allows it (request_limits: true). Two callers that give one resource
// different limits count apart; callers that give the same limit count
// together, on every agent of the mesh. Make one with GCRALimit or
// TiersLimit, once, and pass it with WithLimit (or Need.Limit): it is
// rendered when made, so that passing it allocates nothing. The zero Limit
// is none.
type Limit struct {
	json string // the "limit" object; "" for none
	err  error  // a bad argument, reported by the call that passes it
}

// GCRALimit is a gcra limit: a bucket of burst tokens, refilled by count
// tokens every period. burst and count must be at least 1, period
// positive; the agent checks the rest as its config would.
func GCRALimit(burst, count int, period time.Duration) Limit {
	switch {
	case burst < 1:
		return Limit{err: fmt.Errorf("%w: limit burst: must be ≥ 1, got %d", ErrBadRequest, burst)}
	case count < 1:
		return Limit{err: fmt.Errorf("%w: limit count: must be ≥ 1, got %d", ErrBadRequest, count)}
	case period <= 0:
		return Limit{err: fmt.Errorf("%w: limit period: must be positive, got %v", ErrBadRequest, period)}
	}
	b := []byte(`{"kind":"gcra","burst":`)
	b = strconv.AppendInt(b, int64(burst), 10)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, int64(count), 10)
	b = append(b, `,"period":`...)
	b = appendString(b, period.String())
	return Limit{json: string(append(b, '}'))}
}

// TiersLimit is a tiers limit in the compact tier syntax: groups of four
// numbers, "limit,window,active,cooldown", the durations in seconds (e.g.
// "5,1,1,0,50,5,5,15": 5 a second, then a burst tier of 50 in 5 s, 15 s of
// cooldown). The agent parses and checks it as its config would.
func TiersLimit(tiers string) Limit {
	b := []byte(`{"kind":"tiers","tiers":`)
	b = appendString(b, tiers)
	return Limit{json: string(append(b, '}'))}
}

// WithLimit sets the limit a Request, Refund or Reset decides under
// (Limit). A resource the agent's config defines keeps its configured
// limit; a limit the agent refuses is an *APIError matching ErrBadLimit.
func WithLimit(l Limit) Option {
	if l.json == "" && l.err == nil {
		return Option{}
	}
	return Option{kind: optLimit, lim: l}
}
