package api

import "syscall"

// childAttr: a simulation child is killed when the agent's thread that
// started it ends (the agent is gone), so that none outlives it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
