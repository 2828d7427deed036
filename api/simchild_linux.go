package api

import (
	"os"
	"syscall"
	"time"
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
// score); and the kernel ends the child once it has used cpu of processor
// time in all, its garbage collection included (RLIMIT_CPU: SIGXCPU, then
// SIGKILL a second later), which the pacing, counting the simulation's
// thread only, does not bound. Failures change nothing.
func childSetup(cpu time.Duration) {
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	secs := uint64((cpu + time.Second - 1) / time.Second)
	_ = syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: secs, Max: secs + 1})
}

// overCPU reports whether ps, a child's end, is the kernel ending it for
// its processor time (childSetup, with cpu): killed by a signal after
// using at least cpu.
func overCPU(ps *os.ProcessState, cpu time.Duration) bool {
	if ps == nil {
		return false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && (ws.Signal() == syscall.SIGXCPU || ws.Signal() == syscall.SIGKILL) &&
		ps.UserTime()+ps.SystemTime() >= cpu
}
