package adaptive

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults of Config: the one definition of each, filled in by
// Config.WithDefaults, which package config's normalization calls too, so
// the config file's defaults are these.
const (
	// DefaultGrowEvery is the successes per +1 of the window when GrowEvery is 0.
	DefaultGrowEvery = 10
	// DefaultMargin is the margin when Margin is 0.
	DefaultMargin = 10
	// DefaultTimeout is the Tracker's timeout when Timeout is 0.
	DefaultTimeout = 30 * time.Second
	// DefaultHeadroom is the Predictive rules' headroom when Headroom is 0.
	DefaultHeadroom = 0.9
)

// MinMinWindow is the least MinWindow Validate accepts: a window of 0
// would admit nothing, and no success could ever grow it back. Package
// config bounds min_window with it.
const MinMinWindow = 1

// Rules selects how a Window adapts.
type Rules uint8

const (
	// OpenZiti is the adaptive rate limiter of OpenZiti v0.32 and the
	// contract of the sidecar's kind adaptive (docs/semantics.md), exactly: the
	// window starts at MaxWindow, grows by one every GrowEvery successes
	// (counted only while it is below MaxWindow), and a backoff at position
	// p sets it to max(MinWindow, min(window, p − Margin)).
	OpenZiti Rules = iota
	// Predictive is OpenZiti's rules plus what the window learns from the
	// latencies it sees: the time one position of the queue takes, and the
	// callers' patience (the shortest latency that ended in a backoff). It
	// admits a call only while the wait predicted at its position fits in
	// Headroom of that patience, and drops work at the head of the queue
	// that could no longer finish in time. See predictive.go.
	Predictive
)

// String returns "openziti" or "predictive".
func (r Rules) String() string {
	switch r {
	case OpenZiti:
		return "openziti"
	case Predictive:
		return "predictive"
	}
	return fmt.Sprintf("Rules(%d)", uint8(r))
}

// Config configures a Window (and a Limiter or Tracker around one). The
// zero value is not valid: MinWindow and MaxWindow are required. A zero
// GrowEvery, Margin, Timeout or Headroom means that field's default
// (WithDefaults); Validate states every bound.
type Config struct {
	// MinWindow is the floor of the window: the fewest calls admitted at
	// once however many back off; ≥ MinMinWindow (1).
	MinWindow int
	// MaxWindow is the ceiling and the starting window; ≥ MinWindow.
	MaxWindow int
	// GrowEvery is how many successes grow the window by one; 0 means
	// DefaultGrowEvery. Smaller recovers faster after a backoff and probes
	// harder.
	GrowEvery int
	// Margin is how far below a failing position the window drops, and
	// how far past the window queued work may be when it reaches the head
	// before it is dropped; 0 means DefaultMargin.
	Margin int
	// Timeout is how long a Tracker's ticket may stay outstanding before it
	// counts as a backoff; 0 means DefaultTimeout. Window and Limiter do
	// not use it.
	Timeout time.Duration
	// Rules selects OpenZiti's rules (the zero value) or Predictive.
	Rules Rules
	// Headroom (Predictive) is the fraction of the callers' learned
	// patience a newly admitted call may be predicted to wait, in (0, 1];
	// 0 means DefaultHeadroom. Lower rejects earlier and wastes less work
	// when service times vary; higher keeps more callers queued.
	Headroom float64
}

// ErrConfig is wrapped by the errors of Config.Validate.
var ErrConfig = errors.New("adaptive: bad config")

// Validate reports every problem of c, each naming the field, joined.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	if c.MinWindow < MinMinWindow {
		bad("MinWindow: must be ≥ %d, got %d", MinMinWindow, c.MinWindow)
	}
	if least := max(c.MinWindow, MinMinWindow); c.MaxWindow < least {
		bad("MaxWindow: must be ≥ MinWindow (%d), got %d", least, c.MaxWindow)
	}
	if c.GrowEvery < 0 {
		bad("GrowEvery: must be ≥ 0, got %d", c.GrowEvery)
	}
	if c.Margin < 0 {
		bad("Margin: must be ≥ 0, got %d", c.Margin)
	}
	if c.Timeout < 0 {
		bad("Timeout: must be ≥ 0, got %v", c.Timeout)
	}
	if c.Rules > Predictive {
		bad("Rules: must be OpenZiti or Predictive, got %d", uint8(c.Rules))
	}
	if c.Headroom < 0 || c.Headroom > 1 || math.IsNaN(c.Headroom) {
		bad("Headroom: must be in [0, 1], got %v", c.Headroom)
	}
	return errors.Join(errs...)
}

// WithDefaults returns c with its zero GrowEvery, Margin, Timeout and
// Headroom set to DefaultGrowEvery, DefaultMargin, DefaultTimeout and
// DefaultHeadroom; every other field, and a non-zero one even when invalid,
// is returned as it is. It is the one place the defaults are filled in:
// NewWindow and Reconfigure call it, and so does package config when it
// normalizes a resource of kind adaptive. It is idempotent.
func (c Config) WithDefaults() Config {
	if c.GrowEvery == 0 {
		c.GrowEvery = DefaultGrowEvery
	}
	if c.Margin == 0 {
		c.Margin = DefaultMargin
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Headroom == 0 {
		c.Headroom = DefaultHeadroom
	}
	return c
}

// Call is an admitted call: its position when admitted and the instant.
type Call struct {
	// Pos is the call's position: the calls outstanding when it was
	// admitted, itself included (1 = it was alone).
	Pos int
	// At is when it was admitted.
	At time.Time
}

// Window is the pure core of the adaptive queue window: the window, the
// calls outstanding and what the rules learned. Every method takes the
// instant it acts at; none reads a clock, sleeps or locks. Not safe for
// concurrent use: Limiter and Tracker wrap it with a mutex. Make one with
// NewWindow; the zero value is not usable.
type Window struct {
	cfg         Config
	window      int
	outstanding int
	successes   int // OpenZiti's success counter: never reset, counts only below MaxWindow
	pred        predictor
}

// NewWindow returns a window of cfg, starting at cfg.MaxWindow with
// nothing outstanding, or cfg's problems (ErrConfig).
func NewWindow(cfg Config) (*Window, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	return &Window{cfg: cfg, window: cfg.MaxWindow}, nil
}

// Config returns the window's config, defaults filled in.
func (w *Window) Config() Config { return w.cfg }

// Size returns the window: the most calls admitted at once.
func (w *Window) Size() int { return w.window }

// Outstanding returns how many admitted calls have not finished.
func (w *Window) Outstanding() int { return w.outstanding }

// Admit admits a call at now when its position, outstanding + 1, is within
// the window; ok is false (and nothing changes) otherwise.
func (w *Window) Admit(now time.Time) (c Call, ok bool) {
	pos := w.outstanding + 1
	if pos > w.window {
		return Call{}, false
	}
	w.outstanding++
	return Call{Pos: pos, At: now}, true
}

// Success records that c finished in time at now: every GrowEvery-th
// success while the window is below MaxWindow grows it by one.
func (w *Window) Success(c Call, now time.Time) {
	w.done()
	if w.cfg.Rules == Predictive {
		w.pred.success(w, c, now)
		return
	}
	w.grow()
}

// Backoff records that c's caller gave up (it timed out, or the work was
// done too late to be of use) at now: the window drops to
// max(MinWindow, min(window, c.Pos − Margin)).
func (w *Window) Backoff(c Call, now time.Time) {
	w.done()
	w.shrinkTo(c.Pos - w.cfg.Margin)
	if w.cfg.Rules == Predictive {
		w.pred.backoff(w, c, now)
	}
}

// Release records that c ended without saying anything about the window
// (its work failed for another reason, or it was dropped): it stops being
// outstanding and nothing else changes.
func (w *Window) Release(c Call) { w.done() }

// Stale reports whether c, reaching the head of a queue at now, should be
// dropped instead of run: its position is beyond window + Margin (the
// window shrank after it was admitted, so it has likely timed out), or,
// under Predictive, it has waited so long that it could not finish before
// its caller gives up. It changes nothing: the caller then calls Release.
func (w *Window) Stale(c Call, now time.Time) bool {
	if c.Pos > w.window+w.cfg.Margin {
		return true
	}
	return w.cfg.Rules == Predictive && w.pred.late(c, now)
}

// Reconfigure puts cfg in force, keeping the window, the outstanding calls
// and what was learned; the window is clamped into cfg's [MinWindow,
// MaxWindow]. A change of Rules keeps the window (it is what both rules
// adapt) but forgets what the Predictive rules had learned, so that a
// switch back to them relearns from fresh latencies instead of resuming
// from estimates made before the switch.
func (w *Window) Reconfigure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Rules != w.cfg.Rules {
		w.pred = predictor{}
	}
	w.cfg = cfg.WithDefaults()
	w.window = min(max(w.window, w.cfg.MinWindow), w.cfg.MaxWindow)
	if w.cfg.Rules == Predictive {
		w.pred.clamp(w)
	}
	return nil
}

func (w *Window) done() {
	if w.outstanding > 0 {
		w.outstanding--
	}
}

// grow is OpenZiti's success rule.
func (w *Window) grow() {
	if w.window >= w.cfg.MaxWindow {
		return
	}
	w.successes++
	if w.successes%w.cfg.GrowEvery == 0 {
		w.window = min(w.window+1, w.cfg.MaxWindow)
	}
}

// shrinkTo is OpenZiti's backoff rule for a target window next.
func (w *Window) shrinkTo(next int) {
	if w.window <= w.cfg.MinWindow {
		return
	}
	if next < w.window {
		w.window = max(next, w.cfg.MinWindow)
	}
}
