package main

import (
	"errors"
	"os/exec"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// proc.go runs the child processes (obol's agent, the floor, redis-server,
// envoyproxy/ratelimit); their CPU time is read by benchkit.CPUTime.

// startChild starts name's process cmd, its stdout and stderr kept as their
// last 30 lines (benchkit.StartChild).
func startChild(name string, cmd *exec.Cmd) (*benchkit.Child, error) {
	return benchkit.StartChild(name, cmd, 30, nil)
}

// errNoProc is returned where /proc cannot be read (not Linux).
var errNoProc = errors.New("/proc/PID/stat cannot be read here: bench/rls measures CPU on Linux only")
