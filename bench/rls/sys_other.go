//go:build !linux

package main

import "os/exec"

// setParentDeathSignal does nothing where the kernel has no parent-death
// signal; the servers are stopped on the way out as usual.
func setParentDeathSignal(*exec.Cmd) {}
