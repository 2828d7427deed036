package local

import (
	"math"
	"time"

	"github.com/obol-dev/obol/adaptive"
	"github.com/obol-dev/obol/config"
)

// pacer.go is the kind pacer: one adaptive.Pacer per resource, which tells
// the callers of a rate-limited API elsewhere how long to wait before each
// call (Pace) and learns from each reply (Observe).
//
// The pacer is per agent and nothing of it is gossiped. Its input is the
// remaining count the paced API reports, which every client of the quota
// sees alike: that shared signal is how KeepReserve's clients converge on
// equal shares without knowing of each other, so agents need not tell each
// other anything. Gossiping it would add a tick of delay to a signal each
// agent already reads first-hand, and a wait is advice to one caller, not
// a count that could be over-spent.
//
// All of an agent's callers share its one pacer, as the threads of a
// process share rate_throttle_client's throttle: under KeepReserve they
// take successive slots of one schedule; the two baselines keep the state
// of one call at a time, so with concurrent callers a 429 makes the next
// Pace, whoever asks, wait out the backoff.
//
// This file holds the kind's own rules, pure: the pacer config a
// resource's config makes and the outcome of a call; pacer_res.go keeps
// the pacer of each resource and answers Pace and Observe.

// pacerConfig returns the pacer config of rc, validated and normalized:
// config's translation (config.Resource.PacerConfig), as it is. Package
// config owns the parameters' defaults and bounds; nothing is clamped or
// defaulted here.
func pacerConfig(rc *config.Resource) adaptive.PacerConfig { return rc.PacerConfig() }

// Pacing is the outcome of Pace and Observe.
type Pacing struct {
	// Wait is, from Pace, how long the caller should wait before its
	// call; from Observe, how long a call asking now would wait (without
	// jitter, and without counting it). 0 for a lenient pacing.
	Wait time.Duration
	// Rate is the rate, in calls per second, the pacer spaces calls at
	// now; +Inf when it does not space them (nothing learned yet, a quota
	// well above its reserve, or a strategy that only backs off).
	Rate float64
	// Remaining is the last remaining count the pacer saw (a 429 counts
	// as 0); -1 when it has seen none, and for a lenient pacing.
	Remaining int
	// Lenient is true when the resource is paced without a pacer: it is
	// unconfigured (its namespace allows that) or its namespace ignores
	// its config. Wait is then 0.
	Lenient bool
}

func lenientPacing() Pacing { return Pacing{Rate: math.Inf(1), Remaining: -1, Lenient: true} }

// MaxRemaining is the largest remaining count Observe takes: 18 digits,
// the most adaptive.ParseRateLimitRemaining reads.
const MaxRemaining = 999_999_999_999_999_999
