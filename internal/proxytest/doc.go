// Package proxytest runs the real parts of the proxy examples' tests (under
// deploy/sidecar): the agent built from ./cmd/agent, a small upstream
// application that counts the requests reaching it, and any proxy binary as
// a child process, all on loopback or in the test's temporary directory.
// Every process it starts is stopped by the test's cleanup. Readiness is
// polled with a deadline, never waited for with a sleep.
//
// This package is internal: only obol's own tests use it.
package proxytest
