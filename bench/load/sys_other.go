//go:build !linux

package main

import "os/exec"

// setParentDeathSignal does nothing off Linux (where the generator cannot
// read /proc anyway).
func setParentDeathSignal(*exec.Cmd) {}
