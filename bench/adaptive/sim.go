package main

import (
	"math/rand/v2"
	"time"

	"github.com/obol-dev/obol/adaptive"
)

// workload is the synthetic workload of OpenZiti's rate limiter test.
type workload struct {
	callers  int           // callers, each retrying at once when rejected
	work     time.Duration // the work of one call, on the one worker
	overrun  time.Duration // extra work time per call, uniform in [0, overrun)
	slowAt   time.Duration // from this instant on (0 = never), the work takes slowWork
	slowWork time.Duration
	giveUp   time.Duration // a caller whose call took longer than this backs off
	duration time.Duration // virtual time simulated
	min, max int           // the window's bounds
	seed     uint64
	sample   time.Duration // how often the window is sampled
}

// outcome is what one run of the workload did.
type outcome struct {
	completed    int // calls that finished within giveUp
	timedOut     int // calls that finished after giveUp (wasted work)
	dropped      int // calls dropped at the head of the queue instead of run
	windows      []int
	firstBackoff time.Duration
}

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// simulate runs the workload on virtual time. Callers that are rejected
// retry at once: in virtual time, the instant the window has room again
// (outstanding drops, or the window grows), a waiting caller takes the
// place. The worker runs one call at a time, in admission order; when it
// finishes one it takes the next before the finished caller reports, as
// OpenZiti's worker goroutine does. The window is sampled every wl.sample.
func simulate(wl workload, rules adaptive.Rules) outcome {
	w, err := adaptive.NewWindow(adaptive.Config{MinWindow: wl.min, MaxWindow: wl.max, Rules: rules})
	if err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(wl.seed, 0x0b01))
	var out outcome
	var queue []adaptive.Call
	idle := wl.callers // callers not in the queue
	t := epoch
	end := epoch.Add(wl.duration)
	fill := func() {
		for idle > 0 {
			c, ok := w.Admit(t)
			if !ok {
				return
			}
			queue = append(queue, c)
			idle--
		}
	}
	// next takes the next call to run, dropping stale ones.
	next := func() (adaptive.Call, bool) {
		for len(queue) > 0 {
			c := queue[0]
			queue = queue[1:]
			if w.Stale(c, t) {
				w.Release(c)
				out.dropped++
				idle++
				fill()
				continue
			}
			return c, true
		}
		return adaptive.Call{}, false
	}
	nextSample := epoch
	fill()
	cur, ok := next()
	for ok {
		work := wl.work
		if wl.slowAt > 0 && !t.Before(epoch.Add(wl.slowAt)) {
			work = wl.slowWork
		}
		if wl.overrun > 0 {
			work += time.Duration(rng.Int64N(int64(wl.overrun)))
		}
		finish := t.Add(work)
		for !nextSample.After(finish) && nextSample.Before(end) {
			out.windows = append(out.windows, w.Size())
			nextSample = nextSample.Add(wl.sample)
		}
		if finish.After(end) {
			break
		}
		t = finish
		done := cur
		cur, ok = next()
		if t.Sub(done.At) > wl.giveUp {
			out.timedOut++
			if out.firstBackoff == 0 {
				out.firstBackoff = t.Sub(epoch)
			}
			w.Backoff(done, t)
		} else {
			out.completed++
			w.Success(done, t)
		}
		idle++
		fill()
		if !ok {
			cur, ok = next()
		}
	}
	return out
}

// ratio returns the timed-out share of processed calls.
func (o outcome) ratio() float64 {
	if o.completed+o.timedOut == 0 {
		return 0
	}
	return float64(o.timedOut) / float64(o.completed+o.timedOut)
}
