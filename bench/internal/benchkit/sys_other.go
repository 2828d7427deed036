//go:build !linux

package benchkit

import "os/exec"

// SetParentDeathSignal does nothing where the kernel has no parent-death
// signal.
func SetParentDeathSignal(*exec.Cmd) {}
