// Waiting and failing open: the backoff between retries, the retry loop of
// max_wait, and the counting and rate-limited logging of decisions made
// without the agent (degraded) or despite it (the kill switch).

package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// backoff returns how long retry i (from 0) sleeps when left of the wait
// remains and the agent said retryAfter: min(left, jitter(base·2^i)), but
// never less than retryAfter. ok is false when no retry fits: nothing is
// left, or retryAfter is longer than what is left (no grant could come in
// time), or no wait would help (retryAfter < 0).
func (c *Client) backoff(i int, left, retryAfter time.Duration) (time.Duration, bool) {
	if left <= 0 || retryAfter < 0 || retryAfter > left {
		return 0, false
	}
	v := c.retryBase
	for ; i > 0 && v < left; i-- {
		v *= 2
	}
	c.randMu.Lock()
	v = jitter(v, c.rand)
	c.randMu.Unlock()
	return max(min(left, v), retryAfter), true
}

// jitter returns a duration drawn uniformly from [v−v/4, v+v/4).
func jitter(v time.Duration, r *rand.Rand) time.Duration {
	q := v / 4
	if q <= 0 {
		return v
	}
	return v - q + time.Duration(r.Int64N(int64(2*q)))
}

// retry calls attempt until it grants, fails, or the wait of o is spent,
// sleeping between attempts as backoff says; it returns the retries made.
// attempt reports whether the call was granted and the agent's retry
// after. A rejection is returned at once when o has no wait, when the kill
// switch is on (it will grant it), or when no retry fits.
func (c *Client) retry(ctx context.Context, o *options, attempt func() (granted bool, retryAfter time.Duration, err error)) (int, error) {
	var start time.Time
	if o.maxWait > 0 {
		start = c.clock.Now()
	}
	for i := 0; ; i++ {
		granted, retryAfter, err := attempt()
		if err != nil || granted || o.maxWait <= 0 || c.kill.Load() {
			return i, err
		}
		sleep, ok := c.backoff(i, o.maxWait-c.clock.Now().Sub(start), retryAfter)
		if !ok {
			return i, nil
		}
		if err := c.clock.Sleep(ctx, sleep); err != nil {
			return i, err
		}
		c.stats.retries.Add(1)
	}
}

// degrade counts and logs events decisions made without the agent.
func (c *Client) degrade(err error, events int) {
	c.stats.degraded.Add(uint64(events))
	if n, ok := c.degradedLog.allow(c.clock.Now(), c.logInterval, events); ok {
		c.log.Warn("obol: agent unavailable; failing open (granting min_copies)", "err", err, "degraded", n)
	}
}

// killed counts and logs a rejection turned into a grant.
func (c *Client) killed(resource, domain string) {
	c.stats.killed.Add(1)
	if n, ok := c.killedLog.allow(c.clock.Now(), c.logInterval, 1); ok {
		c.log.Warn("obol: kill switch on; granting a rejected request", "resource", resource, "domain", domain, "killed", n)
	}
}

// fail counts a client error and returns it.
func (c *Client) fail(err error) error {
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		c.stats.errors.Add(1)
	}
	return err
}

// logLimiter lets one log line through per interval and counts the events
// in between.
type logLimiter struct {
	mu    sync.Mutex
	last  time.Time
	count int
}

// allow records events events at now; ok says whether to log them, n how
// many events (these included) the line stands for.
func (l *logLimiter) allow(now time.Time, every time.Duration, events int) (n int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count += events
	if !l.last.IsZero() && now.Sub(l.last) < every {
		return 0, false
	}
	n, l.count, l.last = l.count, 0, now
	return n, true
}
