//go:build !race

package rls

const raceOn = false
