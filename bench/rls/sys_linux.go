package main

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes cmd's process get SIGKILL when this one dies,
// so that no server outlives an interrupted run.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
