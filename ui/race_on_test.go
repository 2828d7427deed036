//go:build race

package ui_test

// raceSlowdown is how many times the race detector slows the agent's
// simulations down (about 15× measured on the drift tuner's default run):
// the tests' agent gives them that much more processor time.
const raceSlowdown = 15
