package sim

import (
	"errors"
	"time"
)

// pace.go bounds a simulation's work: a limit of processor time, a bound on
// the time on the clock, and rests between slices of work.

// WallFactor is how many times its processor-time limit a simulation may
// take on the clock: a machine busy with decisions gives the low-priority
// thread less of the processor, and the caller's wait is bounded all the
// same.
const WallFactor = 15

// ErrTimeLimit and ErrWallLimit are Pace.Step's reasons to stop.
var (
	ErrTimeLimit = errors.New("time limit")
	ErrWallLimit = errors.New("wall-clock limit")
)

// processStart is the origin of ThreadTime's fallback to the monotonic clock.
var processStart = time.Now()

// The duty cycle: after each Slice of processor time a simulation rests
// RestFactor times as long, so that it takes at most a quarter of one
// processor. A rest, unlike a yield, leaves the processor idle: the Go
// scheduler then polls the network and serves the decisions waiting on it
// at once. A yield alone (runtime.Gosched) does not: on an agent with one
// processor (GOMAXPROCS 1, as under a CPU limit of one core or less) the
// scheduler runs the yielding simulation again before it looks at the
// network, and live decisions waited milliseconds: with three clients
// posting the heaviest simulations and the agent pinned to one processor,
// the probe's p50 went from 0.18 ms (a rest after 2 ms slices) to 6.5 ms
// (yields), and is 0.27 ms with rests after 250 µs slices (go run
// ./bench/abuse -attack simulate). Its p99 came from the one P the
// simulation's locked thread and the decisions shared; lowprio.Run gives the
// thread a P of its own, and Step no longer yields between rests.
const (
	Slice      = 250 * time.Microsecond
	RestFactor = 3
)

// Pace bounds one simulation's work, on the simulation's own thread: the
// limit counts the processor time the work used (so a machine busy with
// decisions, which takes the processor from the low-priority thread, does
// not make a small simulation fail), and the clock bounds how long the
// caller waits (WallFactor times the limit). After each Slice of work Step
// rests RestFactor times as long. It does not yield between rests: the
// simulation's thread holds a P of its own (lowprio.Run), and the thread's low
// priority makes the kernel give the processor to the decisions' threads
// first; a yield of a locked thread only moved the P between threads.
type Pace struct {
	limit, wall time.Duration
	cpu0, slice time.Duration
	wall0       time.Time
	thread      func() time.Duration
	now         func() time.Time
	rest        func(time.Duration)
}

// NewPace starts pacing a simulation under limit (> 0) of processor time,
// read from thread (the calling thread's processor time: ThreadTime), and
// WallFactor × limit on the clock now; it rests with time.Sleep. Call it on
// the simulation's thread.
func NewPace(limit time.Duration, thread func() time.Duration, now func() time.Time) *Pace {
	t := thread()
	return &Pace{limit: limit, wall: WallFactor * limit, cpu0: t, slice: t, wall0: now(), thread: thread, now: now, rest: time.Sleep}
}

// WithRest makes p rest with rest instead of time.Sleep (a fake, for tests
// that move fake clocks), and returns p.
func (p *Pace) WithRest(rest func(time.Duration)) *Pace {
	p.rest = rest
	return p
}

// Limit is the processor time the simulation may use.
func (p *Pace) Limit() time.Duration { return p.limit }

// Wall is how long the simulation may take on the clock.
func (p *Pace) Wall() time.Duration { return p.wall }

// Step is called between units of work: ErrTimeLimit once the work has used
// more than its limit of processor time, ErrWallLimit once it has taken
// more than its bound on the clock; otherwise it rests when a Slice of work
// is done, and returns nil.
func (p *Pace) Step() error {
	t := p.thread()
	switch {
	case t-p.cpu0 > p.limit:
		return ErrTimeLimit
	case p.now().Sub(p.wall0) > p.wall: // the clock: a bound on waiting, not a decision instant
		return ErrWallLimit
	}
	if worked := t - p.slice; worked >= Slice {
		p.rest(RestFactor * worked)
		p.slice = p.thread()
		return nil
	}
	return nil
}
