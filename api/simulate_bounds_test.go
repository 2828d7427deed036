package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/obol-dev/obol/local"
	"github.com/obol-dev/obol/sim"
)

// simBody builds a /v1/simulate body: tiers repeated n times, k requests.
func simBodyOf(tiers string, n, k int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"resource":{"kind":"tiers","tiers":"%s"},"requests":[`, strings.TrimSuffix(strings.Repeat(tiers+",", n), ","))
	for i := range k {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"at_ms":%d,"domain":"d","copies":1}`, i)
	}
	b.WriteString("]}")
	return b.String()
}

// TestSimulateCannotPinTheCPU is the regression test of the hardening
// issue's first attack: one /v1/simulate body of 100k tiers × 10k requests
// took 21.5 s of CPU, and three at once pushed every client into fail-open.
// Now the tiers of a list are capped (config.MaxTiers), the work of one body
// is budgeted, a run has a time limit, and one runs at a time.
func TestSimulateCannotPinTheCPU(t *testing.T) {
	h := newHarness(t)

	// The tier cap: 65 tiers are refused by the config's rules, naming them.
	r := h.post("/v1/simulate", simBodyOf("1,1,1,0", 65, 1))
	if code, msg := errorReply(t, r.body); r.status != 400 || code != "bad_request" || !strings.Contains(msg, "at most 64 tiers, got 65") {
		t.Errorf("65 tiers: %d %s %s", r.status, code, msg)
	}

	// The red team's body, 100k tiers: refused on its size before the config
	// is parsed.
	r = h.post("/v1/simulate", simBodyOf("1,1,1,0", 100_000, 10))
	if code, msg := errorReply(t, r.body); r.status != 413 || code != "too_large" || !strings.Contains(msg, "bytes of config is over the limit of 65536") {
		t.Errorf("100k tiers: %d %s %s", r.status, code, msg)
	}

	// The work budget: 64 tiers × 40,000 requests is over 2,000,000.
	r = h.post("/v1/simulate", simBodyOf("1,1,1,0", 64, 40_000))
	if code, msg := errorReply(t, r.body); r.status != 413 || code != "too_large" || !strings.Contains(msg, "2600000 is over the simulation budget of 2000000") {
		t.Errorf("over budget: %d %s %s", r.status, code, msg)
	}
	// At the edge: 64 tiers × 30,000 requests (1,950,000) runs (with time
	// to finish under the race detector on a loaded machine).
	h.srv.sim.limit = time.Minute
	if r = h.post("/v1/simulate", simBodyOf("1,1,1,0", 64, 30_000)); r.status != 200 {
		t.Errorf("64 tiers × 30000 requests: %d %.200s", r.status, r.body)
	}

	// One at a time: while one runs, another is 429 too_many with Retry-After.
	h.srv.sim.busy.Store(true)
	r = h.post("/v1/simulate", simBodyOf("5,1,1,0", 1, 1))
	if code, msg := errorReply(t, r.body); r.status != 429 || code != "too_many" || r.header.Get("Retry-After") != "1" || !strings.Contains(msg, "one at a time") {
		t.Errorf("concurrent simulation: %d %s %q (Retry-After %q)", r.status, code, msg, r.header.Get("Retry-After"))
	}
	// …and a large body is refused before it is read, saying why.
	r = h.post("/v1/simulate", simBodyOf("5,1,1,0", 1, 5000))
	if code, msg := errorReply(t, r.body); r.status != 413 || code != "too_large" || !strings.Contains(msg, "a simulation is already running") {
		t.Errorf("large body during a simulation: %d %s %q", r.status, code, msg)
	}
	h.srv.sim.busy.Store(false)

	// The time limit: a run past it is stopped and named. Decoding the
	// requests counts as the run's work and is paced as it is, so with a
	// limit of 1 ns the run stops while its requests are decoded.
	h.srv.sim.limit = time.Nanosecond
	r = h.post("/v1/simulate", simBodyOf("5,1,1,0", 1, 1000))
	if code, msg := errorReply(t, r.body); r.status != 413 || code != "too_large" || !strings.Contains(msg, "more than its time limit of 1ns of processor time and was stopped while its requests were decoded") {
		t.Errorf("time limit: %d %s %s", r.status, code, msg)
	}
	// The guard is released after a refusal: the next run proceeds.
	h.srv.sim.limit = DefaultSimulateTimeLimit
	if r = h.post("/v1/simulate", simBodyOf("5,1,1,0", 1, 10)); r.status != 200 {
		t.Errorf("after the refusals: %d %s", r.status, r.body)
	}
}

// TestCapsAnswerTooMany: a full cap on sessions, holds or transfers is 429
// too_many, naming the cap.
func TestCapsAnswerTooMany(t *testing.T) {
	h := newHarness(t)
	h.srv.Engine().SetCaps(local.Caps{Sessions: 1})
	h.ok("/v1/sessions", `{"ttl_ms": 1000}`)
	r := h.post("/v1/sessions", `{"ttl_ms": 1000}`)
	if code, msg := errorReply(t, r.body); r.status != 429 || code != "too_many" || !strings.Contains(msg, "sessions: the agent has 1 open, its cap") {
		t.Errorf("second session: %d %s %q", r.status, code, msg)
	}
}

// A simulation's time limit counts the processor time its thread used, not
// the time on the clock: a simulation starved of the processor (a machine
// busy with decisions, which the low-priority thread yields to) is not
// stopped for it until the wall-clock bound, sim.WallFactor times the limit.
// Both clocks are fakes the test moves: no sleep, no busy loop.
func TestSimulatePaceCountsProcessorTime(t *testing.T) {
	var cpu time.Duration
	wall := t0
	var rested time.Duration
	g := simGuard{limit: 40 * time.Millisecond,
		thread: func() time.Duration { return cpu },
		now:    func() time.Time { return wall },
		rest:   func(d time.Duration) { rested += d }}
	p := g.pace()
	wall = wall.Add(60 * time.Millisecond) // past the limit on the clock, no processor time used
	if err := p.Step(); err != nil {
		t.Fatalf("after 60 ms asleep under a 40 ms limit: %v, want nil (sleeping uses no processor time)", err)
	}
	cpu += 40 * time.Millisecond // at the limit: still within it
	if err := p.Step(); err != nil {
		t.Fatalf("after 40 ms of work under a 40 ms limit: %v, want nil", err)
	}
	if rested != sim.RestFactor*40*time.Millisecond {
		t.Errorf("after 40 ms of work the simulation rested %v, want %v (the duty cycle)", rested, sim.RestFactor*40*time.Millisecond)
	}
	cpu += 10 * time.Millisecond
	if err := p.Step(); !errors.Is(err, sim.ErrTimeLimit) {
		t.Fatalf("after 50 ms of work under a 40 ms limit: %v, want sim.ErrTimeLimit", err)
	}
	if msg := simStopped(p, sim.ErrTimeLimit, "simulation", " after 64 of 1000 requests", "send fewer requests").Error(); !strings.Contains(msg, "used more than its time limit of 40ms of processor time and was stopped after 64 of 1000 requests; send fewer requests") {
		t.Errorf("the time limit's message: %q", msg)
	}

	g.limit = time.Millisecond
	p = g.pace()
	wall = wall.Add(g.limit * sim.WallFactor) // at the bound: still within it
	if err := p.Step(); err != nil {
		t.Fatalf("at %v on the clock: %v, want nil", g.limit*sim.WallFactor, err)
	}
	wall = wall.Add(time.Nanosecond)
	if err := p.Step(); !errors.Is(err, sim.ErrWallLimit) {
		t.Fatalf("past %v on the clock: %v, want sim.ErrWallLimit", g.limit*sim.WallFactor, err)
	}
	if msg := simStopped(p, sim.ErrWallLimit, "cluster simulation", "", "simulate fewer nodes").Error(); !strings.Contains(msg, "could not finish within 15ms on this busy agent and was stopped; retry later, or simulate fewer nodes") {
		t.Errorf("the wall-clock bound's message: %q", msg)
	}
}

// The pace's real clocks: the thread's processor time grows with work on
// it (and not with the clock alone), so the default guard reads them.
func TestSimulatePaceRealClocks(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	g := simGuard{limit: time.Hour}
	p := g.pace()
	start := sim.ThreadTime()
	for sim.ThreadTime() == start { // work until the thread's clock moves
	}
	if err := p.Step(); err != nil {
		t.Fatalf("under an hour's limit: %v", err)
	}
}

// TestSimulateDecodeIsPaced is the regression test of the abuse bench's
// simulate attack: decoding a body of tens of thousands of requests ran
// unpaced, holding an agent with one processor for up to the Go
// scheduler's 10 ms time slice while decisions waited (probe p99 about
// 10 ms). Decoding now steps the simulation's pace every decodeStepEvery
// requests, and a step that stops the simulation stops the decode.
func TestSimulateDecodeIsPaced(t *testing.T) {
	body := simBodyOf("1,1,1,0", 1, 1000)
	for _, f := range []format{formatJSON, formatMsgpack} {
		data := []byte(body)
		if f == formatMsgpack {
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				t.Fatal(err)
			}
			data = []byte(mpBody(t, v))
		}
		steps := 0
		sb, err := decodeSimulatePaced(data, f, func() error { steps++; return nil })
		if err != nil || len(sb.requests) != 1000 {
			t.Fatalf("format %d: %v, %d requests", f, err, len(sb.requests))
		}
		if want := 1000 / decodeStepEvery; steps != want {
			t.Errorf("format %d: %d steps over 1000 requests, want %d", f, steps, want)
		}
		stop := errors.New("stopped")
		steps = 0
		_, err = decodeSimulatePaced(data, f, func() error { steps++; return stop })
		if !errors.Is(err, stop) || steps != 1 {
			t.Errorf("format %d: a step's error: got %v after %d steps, want it after 1", f, err, steps)
		}
	}
}
