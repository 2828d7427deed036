package main

import (
	"context"
	"fmt"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// diff.go sends the trace to several services in lockstep and compares
// their replies.
//
// Both services count in fixed windows aligned to the wall clock (a second
// window starts at each whole second, a minute window at each whole
// minute), so the same request must land in the same windows in both. The
// trace is cut into ticks of one second: tick k's requests all go out
// between 50 ms and (at most) 950 ms after the start of second s0+k, and
// each request goes to every service before the next one leaves, so every
// service sees each request in the same second window. The trace starts at
// a whole second early enough in a minute that its last tick ends before the
// minute does, so no minute window changes within it either, and never at a
// minute's first second (see firstSecond). A tick that
// runs past its second is an error (the machine was too slow), never
// silently compared.

// tickStart and tickEnd bound where in its second a tick's requests go out.
const (
	tickStart = 50 * time.Millisecond
	tickEnd   = 950 * time.Millisecond
)

// caller is one service's ShouldRateLimit.
type caller struct {
	name string
	cl   rlsv3.RateLimitServiceClient
}

// replayResult is every service's replies to the trace, in trace order.
type replayResult struct {
	replies [][]*rlsv3.RateLimitResponse // [service][step]
	sentAt  []time.Time                  // when each step went out (to the first service)
}

// replay sends trace to every service in lockstep (see above), starting at
// the first whole second from which the trace fits inside one minute, and
// waiting for it.
func replay(ctx context.Context, callers []caller, trace []step) (*replayResult, error) {
	ticks := 0
	if len(trace) > 0 {
		ticks = trace[len(trace)-1].tick + 1
	}
	if ticks > 55 {
		return nil, fmt.Errorf("the trace spans %d seconds: at most 55 fit in a minute", ticks)
	}
	s0 := firstSecond(time.Now(), ticks)
	res := &replayResult{replies: make([][]*rlsv3.RateLimitResponse, len(callers)), sentAt: make([]time.Time, len(trace))}
	for i := range callers {
		res.replies[i] = make([]*rlsv3.RateLimitResponse, len(trace))
	}
	for i, st := range trace {
		second := s0.Add(time.Duration(st.tick) * time.Second)
		if err := benchkit.SleepUntil(ctx, second.Add(tickStart)); err != nil {
			return nil, err
		}
		res.sentAt[i] = time.Now()
		for j, c := range callers {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			reply, err := c.cl.ShouldRateLimit(cctx, st.req)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("step %d (tick %d) to %s: %w (request %s)", i, st.tick, c.name, err, describe(st.req))
			}
			res.replies[j][i] = reply
		}
		if late := time.Since(second); late > tickEnd {
			return nil, fmt.Errorf("step %d of tick %d ended %v into its second, past %v: the machine is too loaded for a wall-clock-aligned comparison; run it again on a quieter one", i, st.tick, late.Round(time.Millisecond), tickEnd)
		}
	}
	return res, nil
}

// firstSecond returns the first whole second after now, other than a
// minute's first, from which ticks seconds end within the same minute (the
// next minute's second second if they do not fit in this one).
//
// Second 0 is avoided because envoyproxy/ratelimit keys a counter by
// domain, entries and window start, not by unit: at a whole minute, the
// per-second window and the per-minute window of the same entries (a
// per-request override of a configured limit) start at the same instant and
// are one Redis key, and the one's 1 s expiry can drop the other's count.
// obol keeps them apart; the trace compares the rest, not that collision.
func firstSecond(now time.Time, ticks int) time.Time {
	s := now.Truncate(time.Second).Add(time.Second)
	if s.Second() == 0 {
		s = s.Add(time.Second)
	}
	if s.Second()+ticks > 60 {
		s = now.Truncate(time.Minute).Add(time.Minute + time.Second)
	}
	return s
}

// resetTolerance is how far apart two services' duration_until_reset may
// be: envoyproxy/ratelimit rounds to whole seconds from its own clock read.
const resetTolerance = time.Second

// mismatch is one difference between two services' replies.
type mismatch struct {
	step  int
	field string
	want  string // the reference service's
	got   string
}

// compareReplies compares got with want (the reference's) for one step:
// overall_code, the number of statuses, and per status code, current_limit
// (requests_per_unit, unit, name), limit_remaining and duration_until_reset
// within resetTolerance.
func compareReplies(stepIdx int, want, got *rlsv3.RateLimitResponse) []mismatch {
	var out []mismatch
	add := func(field string, w, g any) {
		out = append(out, mismatch{step: stepIdx, field: field, want: fmt.Sprint(w), got: fmt.Sprint(g)})
	}
	if want.GetOverallCode() != got.GetOverallCode() {
		add("overall_code", want.GetOverallCode(), got.GetOverallCode())
	}
	ws, gs := want.GetStatuses(), got.GetStatuses()
	if len(ws) != len(gs) {
		add("len(statuses)", len(ws), len(gs))
		return out
	}
	for i := range ws {
		w, g := ws[i], gs[i]
		p := fmt.Sprintf("statuses[%d].", i)
		if w.GetCode() != g.GetCode() {
			add(p+"code", w.GetCode(), g.GetCode())
		}
		wl, gl := w.GetCurrentLimit(), g.GetCurrentLimit()
		switch {
		case (wl == nil) != (gl == nil):
			add(p+"current_limit", limitString(wl), limitString(gl))
		case wl != nil && (wl.GetRequestsPerUnit() != gl.GetRequestsPerUnit() || wl.GetUnit() != gl.GetUnit() || wl.GetName() != gl.GetName()):
			add(p+"current_limit", limitString(wl), limitString(gl))
		}
		if w.GetLimitRemaining() != g.GetLimitRemaining() {
			add(p+"limit_remaining", w.GetLimitRemaining(), g.GetLimitRemaining())
		}
		wr, gr := w.GetDurationUntilReset(), g.GetDurationUntilReset()
		switch {
		case (wr == nil) != (gr == nil):
			add(p+"duration_until_reset", wr.AsDuration(), gr.AsDuration())
		case wr != nil && (wr.AsDuration()-gr.AsDuration()).Abs() > resetTolerance:
			add(p+"duration_until_reset", wr.AsDuration(), gr.AsDuration())
		}
	}
	return out
}

// limitString renders a current_limit.
func limitString(l *rlsv3.RateLimitResponse_RateLimit) string {
	if l == nil {
		return "none"
	}
	return fmt.Sprintf("%d/%s name=%q", l.GetRequestsPerUnit(), l.GetUnit(), l.GetName())
}

// compareAll compares every step's reply of service got with the
// reference's.
func compareAll(res *replayResult, ref, got int) []mismatch {
	var out []mismatch
	for i := range res.replies[ref] {
		out = append(out, compareReplies(i, res.replies[ref][i], res.replies[got][i])...)
	}
	return out
}

// decisionCounts counts a service's replies by overall_code and its
// statuses that carry a limit, to show a trace exercises both outcomes.
func decisionCounts(replies []*rlsv3.RateLimitResponse) (ok, over, limited int) {
	for _, r := range replies {
		if r.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
			over++
		} else {
			ok++
		}
		for _, s := range r.GetStatuses() {
			if s.GetCurrentLimit() != nil {
				limited++
			}
		}
	}
	return ok, over, limited
}
