package benchkit

import (
	"os/exec"
	"syscall"
)

// SetParentDeathSignal makes the kernel end cmd's process (SIGKILL) when
// this one dies, so that no agent, floor or peer outlives an interrupted
// run.
func SetParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
