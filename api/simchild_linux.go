package api

import (
	"os"
	"syscall"
)

// childAttr: a simulation child is killed when the agent's thread that
// started it ends (the agent is gone), so that none outlives it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// childExe is the executable a simulation child runs: the agent's own
// image, even when the file it was started from has been replaced or
// removed since (an upgrade in place).
func childExe() (string, error) { return "/proc/self/exe", nil }

// childSetup: should memory run out, the kernel kills the simulation
// child before the agent (an unprivileged process may raise its own
// score). A failure changes nothing.
func childSetup() { _ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0) }
