package sim

import (
	"errors"
	"runtime"
	"time"
)

// pace.go bounds a simulation's work: a limit of processor time, a bound on
// the time on the clock, and a yield between units of work.

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

// Pace bounds one simulation's work, on the simulation's own thread: the
// limit counts the processor time the work used (so a machine busy with
// decisions, which takes the processor from the low-priority thread, does
// not make a small simulation fail), and the clock bounds how long the
// caller waits (WallFactor times the limit).
//
// Between units of work Step yields the processor to every goroutine ready
// to run (runtime.Gosched) instead of resting a fixed share of the time: a
// rest slows a simulation on an idle agent as much as on a busy one, while a
// yield costs nothing when no decision waits and lets every waiting one run
// first. The thread's low priority does the same for the kernel's threads.
type Pace struct {
	limit, wall time.Duration
	cpu0        time.Duration
	wall0       time.Time
	thread      func() time.Duration
	now         func() time.Time
}

// NewPace starts pacing a simulation under limit (> 0) of processor time,
// read from thread (the calling thread's processor time: ThreadTime), and
// WallFactor × limit on the clock now. Call it on the simulation's thread.
func NewPace(limit time.Duration, thread func() time.Duration, now func() time.Time) *Pace {
	return &Pace{limit: limit, wall: WallFactor * limit, cpu0: thread(), wall0: now(), thread: thread, now: now}
}

// Limit is the processor time the simulation may use.
func (p *Pace) Limit() time.Duration { return p.limit }

// Wall is how long the simulation may take on the clock.
func (p *Pace) Wall() time.Duration { return p.wall }

// Step is called between units of work: ErrTimeLimit once the work has used
// more than its limit of processor time, ErrWallLimit once it has taken
// more than its bound on the clock; otherwise it yields and returns nil.
func (p *Pace) Step() error {
	switch {
	case p.thread()-p.cpu0 > p.limit:
		return ErrTimeLimit
	case p.now().Sub(p.wall0) > p.wall: // the clock: a bound on waiting, not a decision instant
		return ErrWallLimit
	}
	runtime.Gosched()
	return nil
}
