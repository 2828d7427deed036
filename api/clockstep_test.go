package api

import (
	"testing"
	"time"

	timebase "github.com/obol-dev/obol/internal/clock"
)

// TestClockStepsDoNotMoveDecisions is the regression test of the hardening
// issue's sixth attack: decisions ran on the wall clock, so stepping it back
// an hour denied a key for an hour, and forward a day dropped every session
// and hold. Decisions now run on the agent's time base (the wall clock at
// start plus monotonic time); here both clocks are faked, and the wall clock
// is stepped while monotonic time moves on normally.
func TestClockStepsDoNotMoveDecisions(t *testing.T) {
	h := newHarness(t)
	start := t0
	var elapsed, step time.Duration
	base := timebase.NewMonotonicFrom(start,
		func(time.Time) time.Duration { return elapsed },
		func() time.Time { return start.Add(elapsed + step) })
	h.srv.now, h.srv.realClock, h.srv.base = base.Now, true, base // the agent's own setting, on fake clocks

	// t/thirds: a bucket of 3, refilled at 3 a second.
	if m := h.ok("/v1/request", `{"resource":"t/thirds","domain":"d","copies":3}`); num(t, m, "granted") != 3 {
		t.Fatalf("first request: %v", m)
	}
	if m := h.ok("/v1/request", `{"resource":"t/thirds","domain":"d"}`); num(t, m, "granted") != 0 {
		t.Fatalf("the bucket is empty: %v", m)
	}
	// The wall clock steps back an hour; a second passes.
	step, elapsed = -time.Hour, elapsed+time.Second
	if m := h.ok("/v1/request", `{"resource":"t/thirds","domain":"d","copies":3}`); num(t, m, "granted") != 3 {
		t.Errorf("a second later, after the wall clock stepped back 1 h: %v (it used to be denied for the hour)", m)
	}

	// A session of 30 s with a hold; the wall clock steps forward a day; a
	// second passes: the session and its hold are still there.
	sid := str(t, h.ok("/v1/sessions", `{"ttl_ms":30000}`), "session")
	if m := h.ok("/v1/reserve", `{"resource":"t/copies","domain":"d","copies":1,"session":"`+sid+`"}`); num(t, m, "granted") != 1 {
		t.Fatalf("reserve: %v", m)
	}
	step, elapsed = 24*time.Hour, elapsed+time.Second
	if r := h.post("/v1/sessions/"+sid+"/keepalive", ""); r.status != 200 {
		t.Errorf("keepalive a second later, after the wall clock stepped forward 24 h: %d %s (it used to be expired)", r.status, r.body)
	}
	if r := h.do("GET", "/v1/state?resource=t/copies&domain=d", ""); r.status != 200 || num(t, decodeObject(t, r.body), "holds") != 1 {
		t.Errorf("state after the step: %d %s", r.status, r.body)
	}
	if off := base.WallOffset(); off != 24*time.Hour {
		t.Errorf("WallOffset = %v, want 24h", off)
	}
}

// TestClockStepsMovedWallClockDecisions is the control of
// TestClockStepsDoNotMoveDecisions: the same step on a server deciding on the
// wall clock, as the agent did, denies the key for the hour.
func TestClockStepsMovedWallClockDecisions(t *testing.T) {
	h := newHarness(t)
	var elapsed, step time.Duration
	h.srv.now = func() time.Time { return t0.Add(elapsed + step) } // the wall clock
	h.ok("/v1/request", `{"resource":"t/thirds","domain":"d","copies":3}`)
	step, elapsed = -time.Hour, elapsed+time.Second
	m := h.ok("/v1/request", `{"resource":"t/thirds","domain":"d","copies":3}`)
	if num(t, m, "granted") != 0 || num(t, m, "retry_after_ms") < int64(time.Hour/time.Millisecond) {
		t.Errorf("on the wall clock a step back of 1 h should deny for the hour: %v", m)
	}
}
