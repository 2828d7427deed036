package clock

import (
	"testing"
	"time"
)

// TestMonotonicIgnoresWallSteps: the base moves with monotonic time only.
// The wall clock and the monotonic clock are faked; the wall clock is
// stepped back an hour, then forward a day, while monotonic time advances
// by a second each time.
func TestMonotonicIgnoresWallSteps(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var elapsed, step time.Duration
	m := &Monotonic{
		base:  start,
		since: func(time.Time) time.Duration { return elapsed },
		wall:  func() time.Time { return start.Add(elapsed + step) },
	}
	for _, tc := range []struct {
		name    string
		step    time.Duration
		elapsed time.Duration
	}{
		{name: "no step", step: 0, elapsed: time.Second},
		{name: "wall stepped back 1h", step: -time.Hour, elapsed: 2 * time.Second},
		{name: "wall stepped forward 24h", step: 24 * time.Hour, elapsed: 3 * time.Second},
	} {
		before := m.Now()
		step, elapsed = tc.step, tc.elapsed
		got := m.Now()
		if want := start.Add(tc.elapsed); !got.Equal(want) {
			t.Errorf("%s: Now() = %v, want start + elapsed = %v", tc.name, got, want)
		}
		if got.Before(before) {
			t.Errorf("%s: went backwards from %v to %v", tc.name, before, got)
		}
		if off := m.WallOffset(); off != tc.step {
			t.Errorf("%s: WallOffset() = %v, want %v", tc.name, off, tc.step)
		}
	}
}

// TestMonotonicReal: on the real clocks, a reading is the start plus the
// monotonic time elapsed, read between two readings of the elapsed time
// around it (no wait: whatever time passes is what is checked), and At
// agrees with Now.
func TestMonotonicReal(t *testing.T) {
	m := NewMonotonic()
	before := time.Since(m.base)
	a := m.Now()
	t0 := time.Now()
	mid := time.Since(m.base)
	b := m.Now()
	after := time.Since(m.base)
	// Round(0) drops the monotonic reading: the wall readings must move
	// with the monotonic time too.
	for _, r := range []struct {
		name      string
		got       time.Time
		low, high time.Duration
	}{{"first", a, before, mid}, {"second", b, mid, after}} {
		if d := r.got.Round(0).Sub(m.base.Round(0)); d < r.low || d > r.high {
			t.Errorf("%s reading: %v after the start, want within the elapsed time read around it [%v, %v]", r.name, d, r.low, r.high)
		}
	}
	if b.Before(a) {
		t.Errorf("went backwards from %v to %v", a, b)
	}
	if at := m.At(t0); at.Before(a) || at.After(b) {
		t.Errorf("At(%v) = %v, outside [%v, %v]", t0, at, a, b)
	}
	if off := m.WallOffset(); off < -time.Second || off > time.Second {
		t.Errorf("WallOffset() = %v with no step", off)
	}
}
