//go:build race

package api

// raceEnabled is true under the race detector, whose sync.Pool drops some
// of what is put back: allocation counts then mean nothing.
const raceEnabled = true
