package sim

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/obol-dev/obol/config"
)

func gcra(t *testing.T) *config.Resource {
	t.Helper()
	res, err := config.ParseResource([]byte(`{"kind":"gcra","burst":2,"count":1,"period":"1s"}`))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Run decides each request at Base + AtMs on a fresh engine: a burst of 2
// at one instant, the third denied, a refund, and a grant a period later.
func TestRunDecidesAtVirtualInstants(t *testing.T) {
	reqs := []Request{
		{AtMs: 0, Domain: "a", Copies: 1},
		{AtMs: 0, Domain: "a", Copies: 1},
		{AtMs: 0, Domain: "a", Copies: 1},
		{AtMs: 10, Domain: "a", Copies: 1, Refund: true},
		{AtMs: 1000, Domain: "b", Copies: 5},
	}
	want := []struct {
		granted   int
		remaining int
		err       bool
	}{{granted: 1}, {granted: 1}, {granted: 0}, {remaining: 1}, {err: true}}
	err := Run(gcra(t), reqs, func(int) error { t.Fatal("step called for 5 requests"); return nil }, func(i int, o *Outcome) error {
		if at := Base.Add(time.Duration(reqs[i].AtMs) * time.Millisecond); !o.At.Equal(at) {
			t.Errorf("request %d at %v, want %v", i, o.At, at)
		}
		switch w := want[i]; {
		case w.err:
			if o.Err == nil {
				t.Errorf("request %d (5 copies over a burst of 2): no error", i)
			}
		case o.Err != nil:
			t.Errorf("request %d: %v", i, o.Err)
		case reqs[i].Refund:
			if o.Remaining != w.remaining {
				t.Errorf("refund %d: remaining %d, want %d", i, o.Remaining, w.remaining)
			}
		case o.Decision.Granted != w.granted:
			t.Errorf("request %d: granted %d, want %d", i, o.Decision.Granted, w.granted)
		}
		if _, err := o.State(); err != nil {
			t.Errorf("request %d: state: %v", i, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Run calls step every YieldEvery requests with the next one's index, and
// stops at the first error of step or visit, returning it as it is.
func TestRunStepsAndStops(t *testing.T) {
	reqs := make([]Request, 3*YieldEvery+1)
	for i := range reqs {
		reqs[i] = Request{AtMs: int64(i) * 1000, Domain: "d", Copies: 1}
	}
	var steps []int
	visits := 0
	err := Run(gcra(t), reqs, func(i int) error { steps = append(steps, i); return nil }, func(int, *Outcome) error { visits++; return nil })
	if err != nil || visits != len(reqs) || len(steps) != 3 || steps[0] != YieldEvery || steps[2] != 3*YieldEvery {
		t.Fatalf("err %v, %d visits, steps %v", err, visits, steps)
	}

	stop := errors.New("stop")
	visits = 0
	err = Run(gcra(t), reqs, func(int) error { return stop }, func(int, *Outcome) error { visits++; return nil })
	if err != stop || visits != YieldEvery {
		t.Fatalf("step's error: %v after %d visits, want it after %d", err, visits, YieldEvery)
	}
	visits = 0
	err = Run(gcra(t), reqs, func(int) error { return nil }, func(i int, _ *Outcome) error {
		visits++
		if i == 2 {
			return stop
		}
		return nil
	})
	if err != stop || visits != 3 {
		t.Fatalf("visit's error: %v after %d visits, want it after 3", err, visits)
	}
}

// Pace: within both bounds Step yields and returns nil; past the processor
// time, ErrTimeLimit; past WallFactor × the limit on the clock,
// ErrWallLimit. The clocks are fakes.
func TestPaceBounds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cpu, wall time.Duration
		want      error
	}{
		{"fresh", 0, 0, nil},
		{"at the limit", 10 * time.Millisecond, 0, nil},
		{"past the limit", 10*time.Millisecond + 1, 0, ErrTimeLimit},
		{"asleep past the limit", 0, 100 * time.Millisecond, nil},
		{"at the wall bound", 0, WallFactor * 10 * time.Millisecond, nil},
		{"past the wall bound", 0, WallFactor*10*time.Millisecond + 1, ErrWallLimit},
		{"past both", time.Second, time.Hour, ErrTimeLimit},
	} {
		cpu, wall := time.Second, time.Unix(0, 0)
		p := NewPace(10*time.Millisecond, func() time.Duration { return cpu }, func() time.Time { return wall }).WithRest(func(time.Duration) {})
		cpu += tc.cpu
		wall = wall.Add(tc.wall)
		if err := p.Step(); err != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestPaceDutyCycle: under a Slice of work Step only yields; after a Slice
// or more it rests RestFactor times the work, and the next slice starts
// after the rest.
func TestPaceDutyCycle(t *testing.T) {
	cpu, wall := time.Duration(0), time.Unix(0, 0)
	var rests []time.Duration
	p := NewPace(time.Second, func() time.Duration { return cpu }, func() time.Time { return wall }).
		WithRest(func(d time.Duration) { rests = append(rests, d) })
	for _, step := range []struct {
		work time.Duration
		want []time.Duration
	}{
		{Slice - 1, nil},
		{1, []time.Duration{RestFactor * Slice}},
		{Slice / 2, []time.Duration{RestFactor * Slice}},
		{Slice, []time.Duration{RestFactor * Slice, RestFactor * Slice * 3 / 2}},
	} {
		cpu += step.work
		if err := p.Step(); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(rests) != fmt.Sprint(step.want) {
			t.Fatalf("after %v more work: rests %v, want %v", step.work, rests, step.want)
		}
	}
}
