package adaptive

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/obol-dev/obol/internal/clock"
)

// statusTooManyRequests is HTTP's 429: the quota is empty. The package
// names it rather than import net/http, so that the engine, which links
// this package, links no network.
const statusTooManyRequests = 429

// Strategy is how a Pacer throttles.
type Strategy uint8

const (
	// KeepReserve is obol's strategy (pacer_reserve.go): it paces requests
	// at a rate it steers from the server's remaining count, so that the
	// clients together keep a small reserve in the bucket instead of
	// running it dry, and converge on equal shares.
	KeepReserve Strategy = iota
	// ExponentialBackoff is rate_throttle_client's ExponentialBackoff: no
	// wait until a 429, then MinSleep, ×Multiplier per further 429 of the
	// same call (plus jitter); a success resets it.
	ExponentialBackoff
	// ProportionalRemaining is rate_throttle_client's
	// ExponentialIncreaseProportionalRemainingDecrease: every call sleeps
	// first; each 429 adds MinSleep to the sleep, sleeps it (plus
	// jitter) and multiplies it by Multiplier; a success cuts the sleep by
	// the fraction remaining/Limit.
	ProportionalRemaining
)

// String returns the strategy's name.
func (s Strategy) String() string {
	switch s {
	case KeepReserve:
		return "KeepReserve"
	case ExponentialBackoff:
		return "ExponentialBackoff"
	case ProportionalRemaining:
		return "ExponentialIncreaseProportionalRemainingDecrease"
	}
	return fmt.Sprintf("Strategy(%d)", uint8(s))
}

// Defaults of PacerConfig, rate_throttle_client's: the one definition of
// each, filled in by PacerConfig.WithDefaults, which package config's
// normalization calls too.
const (
	// DefaultLimit is the server's quota per DefaultPeriod (Heroku's).
	DefaultLimit = 4500
	// DefaultPeriod is the period of the quota.
	DefaultPeriod = time.Hour
	// DefaultMultiplier is the growth of a sleep per 429.
	DefaultMultiplier = 1.2
	// DefaultJitter is the most a sleep is lengthened at random: 10%.
	DefaultJitter = 0.1
)

// MinMultiplier is the least PacerConfig.Multiplier Validate accepts,
// other than 0 (the default): a 429 never shortens a sleep. Package config
// bounds multiplier with it.
const MinMultiplier = 1.0

// PacerConfig configures a Pacer or a PacerGroup. The zero value paces
// with KeepReserve for a quota of 4500 requests an hour: a zero Limit,
// Period, MinSleep, Multiplier or Jitter means that field's default
// (WithDefaults), a nil Clock or Rand the wall clock or a random seed.
// Validate states every bound.
type PacerConfig struct {
	// Strategy is how to throttle; the zero value is KeepReserve.
	Strategy Strategy
	// Limit is the server's quota: requests per Period, the most its
	// bucket holds (the proportional decrease divides by it); 0 means
	// DefaultLimit.
	Limit int
	// Period is the time the server takes to refill Limit; 0 means
	// DefaultPeriod.
	Period time.Duration
	// MinSleep is the sleep step of a 429; 0 means Period/Limit (0.8 s
	// for 4500 an hour).
	MinSleep time.Duration
	// Multiplier is how much a sleep grows per 429; 0 means
	// DefaultMultiplier. Must be ≥ MinMultiplier (1).
	Multiplier float64
	// Jitter is the most a sleep is lengthened at random, as a fraction
	// of it (uniform in [0, Jitter]); 0 means DefaultJitter, a negative
	// value none.
	Jitter float64
	// StartSleep is the sleep a fresh pacer starts from: the sleep before
	// its first call (ProportionalRemaining) or its first interval
	// (KeepReserve); ExponentialBackoff ignores it. 0 means none.
	StartSleep time.Duration
	// Clock is what Wait and Observe read and sleep on; nil means the wall
	// clock.
	Clock clock.Clock
	// Rand draws the jitter; nil means a generator seeded at random. It is
	// only used under the group's lock.
	Rand *rand.Rand
}

// ErrPacerConfig is wrapped by the errors of PacerConfig.Validate.
var ErrPacerConfig = errors.New("adaptive: bad pacer config")

// Validate reports every problem of c, joined.
func (c PacerConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrPacerConfig}, args...)...))
	}
	if c.Strategy > ProportionalRemaining {
		bad("Strategy: unknown strategy %d", uint8(c.Strategy))
	}
	if c.Limit < 0 {
		bad("Limit: must be ≥ 0, got %d", c.Limit)
	}
	if c.Period < 0 {
		bad("Period: must be ≥ 0, got %v", c.Period)
	}
	if c.MinSleep < 0 {
		bad("MinSleep: must be ≥ 0, got %v", c.MinSleep)
	}
	if c.Multiplier != 0 && (c.Multiplier < MinMultiplier || math.IsInf(c.Multiplier, 0)) || math.IsNaN(c.Multiplier) {
		bad("Multiplier: must be ≥ %v and finite, got %v", MinMultiplier, c.Multiplier)
	}
	if c.Jitter > 1 || math.IsNaN(c.Jitter) {
		bad("Jitter: must be at most 1, got %v", c.Jitter)
	}
	if c.StartSleep < 0 {
		bad("StartSleep: must be ≥ 0, got %v", c.StartSleep)
	}
	return errors.Join(errs...)
}

// WithDefaults returns c with the defaults of its zero fields filled in:
// Limit DefaultLimit, Period DefaultPeriod, MinSleep Period/Limit (of the
// filled-in values), Multiplier DefaultMultiplier, Jitter DefaultJitter (a
// negative Jitter, none, stays). Every other field, and a non-zero one even
// when invalid, is returned as it is; Clock and Rand are left to
// NewPacerGroup. It is the one place the defaults are filled in: NewPacerGroup
// calls it, and so does package config when it normalizes a resource of kind
// pacer. It is idempotent, and never divides by zero (a negative Limit is
// invalid but divides all the same).
func (c PacerConfig) WithDefaults() PacerConfig {
	if c.Limit == 0 {
		c.Limit = DefaultLimit
	}
	if c.Period == 0 {
		c.Period = DefaultPeriod
	}
	if c.MinSleep == 0 {
		c.MinSleep = c.Period / time.Duration(c.Limit)
	}
	if c.Multiplier == 0 {
		c.Multiplier = DefaultMultiplier
	}
	if c.Jitter == 0 {
		c.Jitter = DefaultJitter // a negative one, none, stays as it is
	}
	return c
}

// withRuntime returns c with a nil Clock set to the wall clock and a nil
// Rand to a generator seeded at random.
func (c PacerConfig) withRuntime() PacerConfig {
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return c
}

// PacerGroup is the state several Pacers share, the way rate_throttle_client's
// throttle object is shared by the threads of a process: one sleep value
// (ProportionalRemaining) or one schedule (KeepReserve) for all of them. Make one
// with NewPacerGroup; the zero value is not usable. Safe for concurrent use.
type PacerGroup struct {
	mu  sync.Mutex
	cfg PacerConfig
	// sleep is the shared sleep in seconds (ProportionalRemaining's
	// @sleep_for).
	sleep    float64
	reserve  reserveGroup
	maxSleep time.Duration
	// remaining is the last remaining count observed (a 429 is 0); -1
	// before any.
	remaining int
}

// NewPacerGroup returns a group of cfg, or cfg's problems.
func NewPacerGroup(cfg PacerConfig) (*PacerGroup, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &PacerGroup{cfg: cfg.WithDefaults().withRuntime(), remaining: -1}
	g.sleep = g.cfg.StartSleep.Seconds()
	g.reserve.init(&g.cfg)
	return g, nil
}

// Pacer returns a new pacer of the group, for one goroutine.
func (g *PacerGroup) Pacer() *Pacer {
	g.mu.Lock()
	g.reserve.members++
	g.mu.Unlock()
	return &Pacer{g: g}
}

// MaxSleep returns the longest sleep any of the group's pacers was told to
// take (jitter included).
func (g *PacerGroup) MaxSleep() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.maxSleep
}

// Pacer throttles one client of a rate-limited API that answers 429 when
// throttled and may report its remaining quota: call Wait before each
// request and Observe with its status and remaining count after. It does
// not need to know how many clients share the quota. Make one with
// NewPacer (or PacerGroup.Pacer); the zero value is not usable. A Pacer is
// for one goroutine at a time; pacers of one group may run concurrently.
type Pacer struct {
	g *PacerGroup
	// The call in progress (rate_throttle_client's `call` block, whose
	// local sleep_for starts from the shared one and is written back when
	// the call ends in a success).
	inCall  bool
	sleep   float64       // the call's sleep_for, seconds
	pending time.Duration // the sleep before the call's next attempt
	reserve reservePacer
}

// NewPacer returns a pacer of cfg in a group of its own, or cfg's problems.
func NewPacer(cfg PacerConfig) (*Pacer, error) {
	g, err := NewPacerGroup(cfg)
	if err != nil {
		return nil, err
	}
	return g.Pacer(), nil
}

// Group returns the pacer's group.
func (p *Pacer) Group() *PacerGroup { return p.g }

// Wait sleeps, on the config's clock, for as long as Delay says, or until
// ctx is done (returning ctx.Err()). It is Delay at the clock's reading.
func (p *Pacer) Wait(ctx context.Context) error {
	c := p.g.cfg.Clock
	return c.Sleep(ctx, p.Delay(c.Now()))
}

// Observe records the reply to the request Wait let through: its HTTP
// status and the remaining count the server reported (negative when it
// reported none). It is ObserveAt at the clock's reading.
func (p *Pacer) Observe(status, remaining int) {
	p.ObserveAt(p.g.cfg.Clock.Now(), status, remaining)
}

// Delay returns how long to wait at now before sending the next request,
// and counts that request as sent at now + the delay. It reads no clock.
func (p *Pacer) Delay(now time.Time) time.Duration {
	g := p.g
	g.mu.Lock()
	defer g.mu.Unlock()
	var d time.Duration
	switch g.cfg.Strategy {
	case ExponentialBackoff:
		if !p.inCall {
			p.inCall, p.sleep, p.pending = true, g.cfg.MinSleep.Seconds(), 0
		}
		d = p.pending
	case ProportionalRemaining:
		if !p.inCall {
			p.inCall, p.sleep = true, g.sleep
			p.pending = g.jittered(p.sleep)
		}
		d = p.pending
	default:
		d = g.reserve.delay(g, &p.reserve, now)
	}
	p.pending = 0
	g.maxSleep = max(g.maxSleep, d)
	return d
}

// ObserveAt records, at now, the reply to the last request: its status and
// the remaining count (negative when unknown). A 429 means throttled; any
// other status ends the call. It reads no clock.
func (p *Pacer) ObserveAt(now time.Time, status, remaining int) {
	g := p.g
	g.mu.Lock()
	defer g.mu.Unlock()
	limited := status == statusTooManyRequests
	switch {
	case limited:
		g.remaining = 0
	case remaining >= 0:
		g.remaining = remaining
	}
	switch g.cfg.Strategy {
	case ExponentialBackoff:
		if limited {
			p.pending = g.jittered(p.sleep)
			p.sleep *= g.cfg.Multiplier
		} else {
			p.inCall = false
		}
	case ProportionalRemaining:
		if limited {
			p.sleep += g.cfg.MinSleep.Seconds()
			p.pending = g.jittered(p.sleep)
			p.sleep *= g.cfg.Multiplier
			return
		}
		dec := p.sleep * float64(max(remaining, 0)) / float64(g.cfg.Limit)
		p.sleep = max(p.sleep-dec, 0)
		g.sleep, p.inCall = p.sleep, false
	default:
		g.reserve.observe(g, &p.reserve, now, limited, remaining)
	}
}

// PacerStatus is what a pacer and its group know at an instant.
type PacerStatus struct {
	// Wait is what Delay would return at the instant, jitter left out.
	Wait time.Duration
	// Rate is the rate, in requests per second, the group spaces its
	// requests at: KeepReserve's schedule, or one call per sleep under
	// ProportionalRemaining. It is +Inf when the pacer does not space
	// requests: KeepReserve before it has seen the bucket run low or while
	// the bucket is well above the reserve, ProportionalRemaining with a
	// sleep of 0, and ExponentialBackoff always (it only backs off after a
	// 429).
	Rate float64
	// Remaining is the last remaining count observed, a 429 counting as 0;
	// -1 before any.
	Remaining int
}

// Status returns what p knows at now without changing anything: the wait
// a request asking now would be given (without jitter), the rate the group
// paces at, and the last remaining count it saw. It reads no clock.
func (p *Pacer) Status(now time.Time) PacerStatus {
	g := p.g
	g.mu.Lock()
	defer g.mu.Unlock()
	st := PacerStatus{Rate: math.Inf(1), Remaining: g.remaining}
	switch g.cfg.Strategy {
	case ExponentialBackoff:
		if p.inCall {
			st.Wait = p.pending
		}
	case ProportionalRemaining:
		sleep := g.sleep
		if p.inCall {
			sleep, st.Wait = p.sleep, p.pending
		} else {
			st.Wait = seconds(sleep)
		}
		if sleep > 0 {
			st.Rate = 1 / sleep
		}
	default:
		st.Rate, st.Wait = g.reserve.status(g, &p.reserve, now)
	}
	return st
}

// jittered returns s seconds lengthened by a random fraction in [0, Jitter],
// as rate_throttle_client's sleep(s + s·rand(0.0..0.1)).
func (g *PacerGroup) jittered(s float64) time.Duration {
	if g.cfg.Jitter > 0 {
		s += s * g.cfg.Jitter * g.cfg.Rand.Float64()
	}
	return seconds(s)
}

func seconds(s float64) time.Duration {
	if s <= 0 || math.IsNaN(s) {
		return 0
	}
	if s >= float64(math.MaxInt64/int64(time.Second)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(s * float64(time.Second))
}
