// Package clock is the time source of obol's background loops and clients.
//
// Decisions never read a clock (they take their instant as an argument); the
// loops that call them do, through Clock. Real is the wall clock. Fake is a
// clock that only moves when a test calls Advance, so a test can drive hours of
// simulated time in microseconds without sleeping: a Sleep or timer wakes when
// Advance carries the fake time to or past its deadline.
//
// This package is internal: it is shared by obol's own packages and tests.
package clock
