package clock

import (
	"context"
	"time"
)

// Monotonic is the agent's time base: the wall clock's reading when it was
// made, plus the monotonic time elapsed since. Stepping the system clock
// (by hand, or a time daemon correcting it) does not move it: a step back
// does not freeze every window for the length of the step, and a step
// forward does not expire every session and hold at once. It never goes
// backwards. Its readings still carry Go's monotonic reading, so
// differences between them are exact.
//
// What crosses processes (gossip's time buckets) uses the same base: agents
// whose wall clocks agreed when they started keep agreeing. An agent whose
// wall clock was wrong at start stays as wrong until it restarts; WallOffset
// shows how far the wall clock has moved from the base since.
// Safe for concurrent use.
type Monotonic struct {
	base  time.Time                     // the wall clock's reading at the start, with its monotonic reading
	since func(time.Time) time.Duration // monotonic time elapsed since: time.Since
	wall  func() time.Time              // the wall clock, for WallOffset: time.Now
	fake  bool                          // made by NewMonotonicFrom: At reads Now
}

var _ Clock = (*Monotonic)(nil)

// NewMonotonic returns a time base that starts at the wall clock's reading.
func NewMonotonic() *Monotonic {
	return &Monotonic{base: time.Now(), since: time.Since, wall: time.Now}
}

// NewMonotonicFrom returns a time base that starts at base and reads the
// elapsed time and the wall clock from the functions given: for tests and
// simulations that step a clock.
func NewMonotonicFrom(base time.Time, since func(time.Time) time.Duration, wall func() time.Time) *Monotonic {
	return &Monotonic{base: base, since: since, wall: wall, fake: true}
}

// Now returns the base's reading: start plus monotonic time elapsed.
func (m *Monotonic) Now() time.Time { return m.base.Add(m.since(m.base)) }

// At returns the base's reading at the instant t was read from time.Now (t
// must carry a monotonic reading): a handler that read time.Now() for its
// own timing gets the decision instant without reading the clock again. A
// base made by NewMonotonicFrom has no real clock to place t on: it returns
// Now().
func (m *Monotonic) At(t time.Time) time.Time {
	if m.fake {
		return m.Now()
	}
	return m.base.Add(t.Sub(m.base))
}

// WallOffset returns how far the wall clock is from the base now: positive
// when the wall clock was stepped forward since the base started.
func (m *Monotonic) WallOffset() time.Duration {
	return m.wall().Round(0).Sub(m.Now().Round(0)) // Round(0) drops the monotonic reading: wall minus base
}

// After returns time.After(d): durations are monotonic already.
func (m *Monotonic) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	time.AfterFunc(d, func() { ch <- m.Now() })
	return ch
}

// Sleep waits for d or until ctx is done.
func (m *Monotonic) Sleep(ctx context.Context, d time.Duration) error { return Real{}.Sleep(ctx, d) }
