// Package await is how obol's tests wait: for a condition re-checked each
// time an event says the state it reads may have changed (a Signal, a
// log's Writes), within a bounded deadline, never for a fixed time.
//
// Until waits on an event. Poll re-checks a condition at growing intervals:
// it is for state that no event announces (another process's answer over
// the network, a figure a library keeps to itself), and each caller says in
// a comment why no event exists. Neither ever sleeps for a fixed time to let
// something happen: the deadline is a bound on waiting only, generous
// enough for a loaded machine, and a test that meets its condition returns
// at once.
//
// This package is internal: only obol's own tests use it.
package await
