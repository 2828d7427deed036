//go:build !linux

package api

import (
	"os"
	"syscall"
	"time"
)

// childAttr: nothing beyond the defaults where there is no parent-death
// signal; a child ends with its simulation's time limit.
func childAttr() *syscall.SysProcAttr { return nil }

// childExe is the executable a simulation child runs: the file the agent
// was started from.
func childExe() (string, error) { return os.Executable() }

// childSetup does nothing here: no per-process OOM score, and no
// processor-time limit set.
func childSetup(time.Duration) {}

// overCPU is false where childSetup sets no processor-time limit.
func overCPU(*os.ProcessState, time.Duration) bool { return false }
