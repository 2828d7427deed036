// Package adaptive holds obol's two adaptive limiters, both on an injected
// clock so their behaviour can be tested over simulated hours in seconds.
//
// Server side, the adaptive queue window (OpenZiti's): at most Window calls
// are outstanding; a call asking at position p = outstanding + 1 beyond the
// window is rejected; the window grows by one every GrowEvery successes and
// drops to p − Margin when a caller at position p gives up. Window is the
// pure core (every method takes the instant); Limiter runs the work itself
// (Run, one FIFO queue); Tracker counts calls that run elsewhere (Admit,
// Complete, and a timeout Sweep), which is what the sidecar's kind adaptive
// uses. Rules selects OpenZiti's rules or Predictive, which also learns
// how long a position takes and how long callers wait, and stops growing
// before calls would time out.
//
// Client side, the Pacer throttles a client of a rate-limited API from its
// 429s and remaining counts, without knowing how many clients share the
// quota: Wait before a request, Observe after. Strategies: two baselines
// from rate_throttle_client and KeepReserve, obol's. docs/adaptive.md has
// both algorithms, the benchmarks and their figures.
//
// Each parameter has one definition here. A zero field of Config or
// PacerConfig means its default, the Default… constant it names; the one
// function that fills them in is Config.WithDefaults (PacerConfig.WithDefaults),
// which the constructors call. Validate states the bounds of every field
// and the constructors refuse what it refuses, with an error naming the
// field. The agent's config file reaches this package through package
// config, which fills a resource's defaults by calling the same
// WithDefaults and hands over values its validation has already checked
// against bounds at least as strict as Validate's.
package adaptive
