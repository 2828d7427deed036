package adaptive

import (
	"math"
	"time"
)

// predictor is the state of the Predictive rules. OpenZiti's window learns
// only from failures: it grows by one every GrowEvery successes until calls
// admitted at a too-deep position time out, and it hears of that only when
// they finish, a whole caller timeout later, by which time it has grown
// further and admitted more calls that will time out. It then drops, and
// grows again: a sawtooth that wastes work on every tooth.
//
// The latencies it is told about say more. A call admitted at position p
// that succeeds after latency L says one position of the queue takes about
// L/p (the service time divided by the parallelism); the shortest latency
// that ended in a backoff says how long the callers wait before they give
// up (their patience, D). Together they predict, before admitting a call,
// whether it will finish in time: the window is capped at
//
//	cap = ⌊Headroom · D / perPos⌋
//
// and stops growing at the cap instead of growing into the failures; work
// at the head of a queue that has already waited D − perPos is dropped, since
// it would finish after its caller left. When the service slows down, perPos
// rises and the cap falls at once, before anything times out.
//
// D is learned from evidence both ways: a backoff at a shorter latency
// lowers it, a success at a longer one raises it. Because a capped window
// never sees such a success, D also creeps up by one position's time every
// relaxEvery successes without a backoff, so that callers who become more
// patient are noticed; a probe that goes too far costs about one timeout,
// since the drop at the head stops the rest.
type predictor struct {
	perPos   float64       // seconds per position: EWMA of L/p over successes; 0 = none yet
	deadline time.Duration // the callers' patience D; 0 = unknown
	quiet    int           // successes since the last backoff or relaxation
}

// ewmaWeight is the weight of a new L/p sample.
const ewmaWeight = 1.0 / 8

// relaxEvery returns the successes between two relaxations of D: ten times
// OpenZiti's growth period (100 at the defaults).
func relaxEvery(cfg *Config) int { return 10 * cfg.GrowEvery }

func (p *predictor) success(w *Window, c Call, now time.Time) {
	lat := now.Sub(c.At)
	if c.Pos > 0 && lat >= 0 {
		s := lat.Seconds() / float64(c.Pos)
		if p.perPos == 0 {
			p.perPos = s
		} else {
			p.perPos += (s - p.perPos) * ewmaWeight
		}
	}
	if p.deadline > 0 {
		if lat > p.deadline {
			p.deadline = lat // a caller waited this long and was still there
		}
		p.quiet++
		if p.quiet >= relaxEvery(&w.cfg) {
			p.quiet = 0
			p.deadline += p.step()
		}
	}
	if w.window < w.cfg.MaxWindow {
		w.successes++
		if w.successes%w.cfg.GrowEvery == 0 && w.window+1 <= p.cap(w) {
			w.window++
		}
	}
	p.clamp(w)
}

func (p *predictor) backoff(w *Window, c Call, now time.Time) {
	if lat := now.Sub(c.At); lat > 0 && (p.deadline == 0 || lat < p.deadline) {
		p.deadline = lat
	}
	p.quiet = 0
	p.clamp(w)
}

// step returns one position's time.
func (p *predictor) step() time.Duration {
	return time.Duration(p.perPos * float64(time.Second))
}

// cap returns the deepest position whose predicted wait fits in Headroom
// of D, or MaxWindow while either is unknown.
func (p *predictor) cap(w *Window) int {
	if p.deadline <= 0 || p.perPos <= 0 {
		return w.cfg.MaxWindow
	}
	c := w.cfg.Headroom * p.deadline.Seconds() / p.perPos
	if c >= float64(w.cfg.MaxWindow) || math.IsNaN(c) {
		return w.cfg.MaxWindow
	}
	return int(c)
}

// clamp lowers the window to the cap (never below MinWindow).
func (p *predictor) clamp(w *Window) {
	if c := p.cap(w); w.window > c {
		w.window = max(c, w.cfg.MinWindow)
	}
}

// late reports whether c, at the head of the queue at now, would finish
// only after D.
func (p *predictor) late(c Call, now time.Time) bool {
	if p.deadline <= 0 || p.perPos <= 0 {
		return false
	}
	return now.Sub(c.At)+p.step() >= p.deadline
}

// Deadline returns the callers' patience the Predictive rules learned, 0
// while unknown (and always 0 under OpenZiti's rules).
func (w *Window) Deadline() time.Duration { return w.pred.deadline }

// PerPosition returns the time one position of the queue takes, as the
// Predictive rules estimate it; 0 while unknown or under OpenZiti's rules.
func (w *Window) PerPosition() time.Duration { return w.pred.step() }
