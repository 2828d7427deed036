package main

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel end cmd's process if the generator
// dies first, so that no agent or floor outlives a killed run.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
