package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"

	"github.com/obol-dev/obol/bench/internal/benchkit"
)

// proc.go runs the child processes (obol's agent, the floor, redis-server,
// envoyproxy/ratelimit); their CPU time is read by benchkit.CPUTime.

// child is a process started by this program. Its stdout and stderr are kept
// as their last lines, for the error that reports a failed start.
type child struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited
	logs   *benchkit.TailBuffer
}

// startChild starts name's process cmd, its output going to a tail buffer.
// The child gets SIGKILL when this process dies (Linux).
func startChild(name string, cmd *exec.Cmd) (*child, error) {
	benchkit.SetParentDeathSignal(cmd)
	c := &child{name: name, cmd: cmd, exited: make(chan struct{}), logs: benchkit.NewTailBuffer(30)}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pw.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	var scanned sync.WaitGroup
	scanned.Go(func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.logs.Add(sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr)
	})
	go func() {
		_ = cmd.Wait()
		pw.Close()
		scanned.Wait()
		close(c.exited)
	}()
	return c, nil
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// alive reports whether the child is still running.
func (c *child) alive() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// stop ends the child: SIGTERM, then SIGKILL if it has not exited within 5 s.
func (c *child) stop() {
	if c == nil {
		return
	}
	benchkit.Terminate(c.cmd.Process, c.exited, 5*time.Second)
}

// failure describes a child that did not come up: how it ended and its last
// lines of output.
func (c *child) failure(what string) error {
	state := "still running"
	if !c.alive() {
		state = c.cmd.ProcessState.String()
	}
	return fmt.Errorf("%s: %s (%s); its last output:\n%s", c.name, what, state, c.logs)
}

// errNoProc is returned where /proc cannot be read (not Linux).
var errNoProc = errors.New("/proc/PID/stat cannot be read here: bench/rls measures CPU on Linux only")
