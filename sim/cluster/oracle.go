package cluster

import (
	"time"

	"github.com/obol-dev/obol/config"
)

// oracle.go is the exact limiter per key, fed every grant of every node in
// event order, and the window counts the ratios come from. Pure: instants
// are arguments (ns from the run's start).

type oracle struct {
	gcra bool
	// gcra: emission interval and burst offset, ns.
	ei, b int64
	tat   []int64
	// tiers: limit, active and cooldown, ms; per key the instance start
	// (ms) and what it took.
	limit          int64
	active, cool   int64
	start          []int64
	taken          []int64
	entered        []bool
	falseDenials   int
	window         int64 // ns
	perWindow      float64
	warm, to       int64 // the windows cover [warm, to)
	cur            []int32
	wGrants, wReqs []int32
	worst, sum     float64
	nwin           int
	worstInst      float64 // tiers: the most any instance took ÷ the limit
	// gcra: one exact bucket per key fed every request (granted or not),
	// as if one limiter decided them all: its TAT and grants in the
	// current window, and its worst window. What one exact bucket may
	// grant in an aligned window (its burst plus a period's refill) is
	// the yardstick of worst.
	soloTat    []int64
	soloGrants []int32
	soloWorst  float64
}

// newOracle returns the oracle of resource rc over keys keys, with windows
// from warm until end (ns).
func newOracle(rc *config.Resource, keys int, warm, end int64) *oracle {
	o := &oracle{warm: warm, cur: make([]int32, keys), wGrants: make([]int32, keys), wReqs: make([]int32, keys)}
	for i := range o.cur {
		o.cur[i] = -1
	}
	if rc.Kind == config.KindGCRA {
		o.gcra = true
		o.ei = int64(rc.Period) / int64(rc.Count)
		o.b = o.ei * int64(rc.Burst)
		o.tat = make([]int64, keys)
		o.soloTat, o.soloGrants = make([]int64, keys), make([]int32, keys)
		o.window, o.perWindow = int64(rc.Period), float64(rc.Count)
	} else {
		t := rc.Tiers[0]
		o.limit = int64(t.Limit)
		o.active, o.cool = t.Active.Milliseconds(), t.Cooldown.Milliseconds()
		o.start, o.taken, o.entered = make([]int64, keys), make([]int64, keys), make([]bool, keys)
		o.window, o.perWindow = int64(t.Window), float64(t.Limit)
	}
	o.to = warm + (end-warm)/o.window*o.window
	return o
}

// windowFor is the default warm-up: two windows, at most half the run.
func windowFor(rc *config.Resource) time.Duration {
	if rc.Kind == config.KindGCRA {
		return rc.Period
	}
	return rc.Tiers[0].Window
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// room reports whether the exact limiter of key k had room at t.
func (o *oracle) room(k int, t int64) bool {
	if o.gcra {
		return floorDiv(t+o.b-max(o.tat[k], t), o.ei) >= 1
	}
	ms := floorDiv(t, 1e6)
	if !o.entered[k] || ms >= o.start[k]+o.active+o.cool {
		return true
	}
	return ms < o.start[k]+o.active && o.taken[k] < o.limit
}

// decided records a decision on key k at t.
func (o *oracle) decided(k int, t int64, granted bool) {
	if !granted {
		if o.room(k, t) {
			o.falseDenials++
		}
	} else if o.gcra {
		o.tat[k] = max(o.tat[k], t) + o.ei
	} else {
		ms := floorDiv(t, 1e6)
		if !o.entered[k] || ms >= o.start[k]+o.active+o.cool {
			o.entered[k], o.start[k], o.taken[k] = true, ms, 0
		}
		if ms < o.start[k]+o.active {
			o.taken[k]++
			o.worstInst = max(o.worstInst, float64(o.taken[k])/float64(o.limit))
		}
	}
	soloGranted := o.gcra && floorDiv(t+o.b-max(o.soloTat[k], t), o.ei) >= 1
	if soloGranted {
		o.soloTat[k] = max(o.soloTat[k], t) + o.ei
	}
	if t < o.warm || t >= o.to {
		return
	}
	w := int32((t - o.warm) / o.window)
	if o.cur[k] != w {
		o.flush(k)
		o.cur[k] = w
	}
	o.wReqs[k]++
	if granted {
		o.wGrants[k]++
	}
	if soloGranted {
		o.soloGrants[k]++
	}
}

// used is what key k's exact limiter has taken at t, as a node's view is
// read (judge.go): tiers, the hits of the instance active at t (0 with
// none); gcra, the tokens its bucket is ahead of t, at most the burst.
func (o *oracle) used(k int, t int64) float64 {
	if o.gcra {
		return float64(min(max(o.tat[k]-t, 0), o.b)) / float64(o.ei)
	}
	ms := floorDiv(t, 1e6)
	if !o.entered[k] || ms >= o.start[k]+o.active {
		return 0
	}
	return float64(o.taken[k])
}

// flush closes key k's current window.
func (o *oracle) flush(k int) {
	if o.cur[k] < 0 || o.wReqs[k] == 0 {
		return
	}
	r := float64(o.wGrants[k]) / o.perWindow
	o.worst = max(o.worst, r)
	o.sum += r
	o.nwin++
	o.wGrants[k], o.wReqs[k] = 0, 0
	if o.gcra {
		o.soloWorst = max(o.soloWorst, float64(o.soloGrants[k])/o.perWindow)
		o.soloGrants[k] = 0
	}
}

// close flushes every window and writes the figures into r.
func (o *oracle) close(r *Result) {
	for k := range o.cur {
		o.flush(k)
		o.cur[k] = -1
	}
	r.WorstWindowRatio = o.worst
	if o.nwin > 0 {
		r.MeanWindowRatio = o.sum / float64(o.nwin)
	}
	r.Windows = o.nwin
	r.FalseDenials = o.falseDenials
	r.WorstInstanceRatio = o.worstInst
	r.SoloWorstWindowRatio = o.soloWorst
}
