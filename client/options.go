package client

import (
	"fmt"
	"time"
)

// Option sets a parameter of one call: Copies, MinCopies, MaxWait,
// SettleLater, WithLimit. It is a
// plain value (not a function), so that passing options allocates nothing;
// the zero Option sets nothing.
type Option struct {
	kind optionKind
	n    int64
	lim  Limit // WithLimit's
}

type optionKind uint8

const (
	optCopies optionKind = iota + 1
	optMinCopies
	optMaxWait
	optSettleLater
	optLimit
)

// options are the parameters of one call, as its Options set them.
type options struct {
	copies    int
	minCopies int
	minSet    bool
	maxWait   time.Duration
	settle    bool
	limit     Limit
}

// Copies asks for n copies (hits of a rate-limited resource, copies of a
// copy-limited one); the default is 1. Copies(0) on Request and Check is a
// peek: it spends nothing and describes the state.
func Copies(n int) Option { return Option{kind: optCopies, n: int64(n)} }

// MinCopies lets the agent grant as few as n of the copies asked (between n
// and Copies); the default is Copies (all or nothing). It is also what a
// degraded decision grants (see Decision.Degraded).
func MinCopies(n int) Option { return Option{kind: optMinCopies, n: int64(n)} }

// MaxWait retries a rejection until it is granted or d has passed, backing
// off with jitter and never retrying before the agent's retry_after. The
// default, 0, does not retry. A rejection whose retry_after is longer than
// the wait left (or that no wait would let through) returns at once.
func MaxWait(d time.Duration) Option { return Option{kind: optMaxWait, n: int64(d)} }

// SettleLater asks Request for a settle ticket with its grant
// (Decision.Ticket): the copies asked are an estimate, and Client.Settle
// charges the real cost once it is known (an LLM call's tokens). A
// degraded grant has no ticket, and nothing to settle.
func SettleLater() Option { return Option{kind: optSettleLater, n: 1} }

func (o *options) apply(opt Option) {
	switch opt.kind {
	case optSettleLater:
		o.settle = true
	case optLimit:
		o.limit = opt.lim
	case optCopies:
		o.copies = int(opt.n)
	case optMinCopies:
		o.minCopies, o.minSet = int(opt.n), true
	case optMaxWait:
		o.maxWait = time.Duration(opt.n)
	}
}

// maxCopies is the agent's bound on copies and min_copies.
const maxCopies = 1_000_000_000

// makeOptions applies opts over the defaults and checks the counts.
func makeOptions(opts []Option) (options, error) {
	o := options{copies: 1}
	for _, opt := range opts {
		o.apply(opt)
	}
	if !o.minSet {
		o.minCopies = o.copies
	}
	return o, o.check()
}

func (o *options) check() error {
	if o.copies < 0 || o.copies > maxCopies {
		return fmt.Errorf("%w: copies: must be in [0, %d], got %d", ErrBadRequest, maxCopies, o.copies)
	}
	if o.minCopies < 0 || o.minCopies > o.copies {
		return fmt.Errorf("%w: min_copies: must be in [0, copies=%d], got %d", ErrBadRequest, o.copies, o.minCopies)
	}
	if o.maxWait < 0 {
		return fmt.Errorf("%w: max wait: must be ≥ 0, got %v", ErrBadRequest, o.maxWait)
	}
	return o.limit.err
}

// limitOnly returns the limit opts set, refusing any other option: what
// Refund and Reset take.
func limitOnly(call string, opts []Option) (Limit, error) {
	var l Limit
	for _, opt := range opts {
		switch opt.kind {
		case 0:
		case optLimit:
			l = opt.lim
		default:
			return l, fmt.Errorf("%w: %s takes no option but WithLimit", ErrBadRequest, call)
		}
	}
	return l, l.err
}

// checkNames refuses an empty resource or domain before any call (the
// agent would too, but a degraded client could not say so).
func checkNames(resource, domain string) error {
	if resource == "" {
		return fmt.Errorf("%w: resource: required, got \"\"", ErrBadRequest)
	}
	if domain == "" {
		return fmt.Errorf("%w: domain: required, got \"\"", ErrBadRequest)
	}
	return nil
}
