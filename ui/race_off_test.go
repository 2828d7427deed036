//go:build !race

package ui_test

// raceSlowdown is 1 without the race detector.
const raceSlowdown = 1
