package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc.go runs the child processes (obol's agent, the floor, redis-server,
// envoyproxy/ratelimit) and reads their CPU time from /proc/PID/stat.

// child is a process started by this program. Its stdout and stderr are kept
// as their last lines, for the error that reports a failed start.
type child struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited
	logs   *tailBuffer
}

// startChild starts name's process cmd, its output going to a tail buffer.
// The child gets SIGKILL when this process dies (Linux).
func startChild(name string, cmd *exec.Cmd) (*child, error) {
	setParentDeathSignal(cmd)
	c := &child{name: name, cmd: cmd, exited: make(chan struct{}), logs: newTailBuffer(30)}
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
			c.logs.add(sc.Text())
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
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
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

// tailBuffer keeps the last n lines written to it.
type tailBuffer struct {
	mu    sync.Mutex
	n     int
	lines []string
}

func newTailBuffer(n int) *tailBuffer { return &tailBuffer{n: n} }

func (t *tailBuffer) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > t.n {
		t.lines = t.lines[len(t.lines)-t.n:]
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// parseCPUTicks returns user + system CPU time, in clock ticks, from the
// contents of /proc/PID/stat. The process name (field 2) is in parentheses
// and may itself hold spaces and parentheses, so the fields are counted
// from the last ')'.
func parseCPUTicks(b []byte) (uint64, error) {
	closing := bytes.LastIndexByte(b, ')')
	if bytes.IndexByte(b, '(') < 0 || closing < 0 {
		return 0, fmt.Errorf("/proc stat: no (comm) in %q", b[:min(len(b), 80)])
	}
	// After "pid (comm) " come state (field 3) … utime (14), stime (15).
	rest := bytes.Fields(b[closing+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(rest) <= stime {
		return 0, fmt.Errorf("/proc stat: %d fields after (comm), want at least %d", len(rest), stime+1)
	}
	u, err := strconv.ParseUint(string(rest[utime]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc stat: utime %q: %w", rest[utime], err)
	}
	s, err := strconv.ParseUint(string(rest[stime]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc stat: stime %q: %w", rest[stime], err)
	}
	return u + s, nil
}

// clockTicksPerSecond is the unit of /proc/PID/stat's CPU times
// (sysconf(_SC_CLK_TCK)); it is 100 on every common Linux build, and the
// figures are only ever compared with each other.
const clockTicksPerSecond = 100

// cpuTime returns the CPU time (user + system) the processes pids have used
// so far.
func cpuTime(pids ...int) (time.Duration, error) {
	var ticks uint64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		t, err := parseCPUTicks(b)
		if err != nil {
			return 0, fmt.Errorf("pid %d: %w", pid, err)
		}
		ticks += t
	}
	return time.Duration(ticks) * time.Second / clockTicksPerSecond, nil
}

// errNoProc is returned where /proc cannot be read (not Linux).
var errNoProc = errors.New("/proc/PID/stat cannot be read here: bench/rls measures CPU on Linux only")
