package benchkit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// AgentPackage is the agent's main package, built with `go build`.
const AgentPackage = "github.com/obol-dev/obol/cmd/agent"

// ErrNoGo is GoTool's error when the go command cannot be found.
var ErrNoGo = errors.New("the go command is not on PATH")

// GoTool returns the path of the go command: the one on PATH, else
// $GOROOT/bin/go; ErrNoGo when neither exists.
func GoTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", ErrNoGo
}

// BuildError is a failure of `go build` of the agent (for instance while
// someone is editing it), with the command's output.
type BuildError struct {
	Err    error
	Output []byte
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("go build %s: %v\n%s", AgentPackage, e.Err, bytes.TrimSpace(e.Output))
}

func (e *BuildError) Unwrap() error { return e.Err }

// BuildAgent builds the agent with the go command gobin into dir and
// returns the binary's path (dir/obol-agent); a failed build is a
// *BuildError. It must run inside the module.
func BuildAgent(ctx context.Context, gobin, dir string) (string, error) {
	bin := filepath.Join(dir, "obol-agent")
	out, err := exec.CommandContext(ctx, gobin, "build", "-o", bin, AgentPackage).CombinedOutput()
	if err != nil {
		return "", &BuildError{Err: err, Output: out}
	}
	return bin, nil
}

// Terminate ends process p, whose exit closes exited: SIGTERM, then SIGKILL
// if it has not exited within grace. It returns once the process has exited.
func Terminate(p *os.Process, exited <-chan struct{}, grace time.Duration) {
	_ = p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		_ = p.Kill()
		<-exited
	}
}

// StopGrace is how long Child.Stop waits after SIGTERM before SIGKILL.
const StopGrace = 5 * time.Second

// Child is a process a benchmark started (the agent, a floor, a peer
// service): its output's last lines are kept for the error that reports a
// failed start.
type Child struct {
	Name   string
	Cmd    *exec.Cmd
	Exited chan struct{} // closed once the process has exited and its output is read
	Logs   *TailBuffer
	// Stdin, when set, is closed first by Stop (a floor serves until its
	// stdin reaches EOF).
	Stdin io.Closer
}

// StartChild starts cmd as name's process, ended with this one on Linux
// (SetParentDeathSignal). What it writes to whichever of stdout and stderr
// the caller left nil goes, line by line, to Logs (the last tail lines) and
// to onLine when not nil (called from one goroutine, in order).
func StartChild(name string, cmd *exec.Cmd, tail int, onLine func(line string)) (*Child, error) {
	SetParentDeathSignal(cmd)
	c := &Child{Name: name, Cmd: cmd, Exited: make(chan struct{}), Logs: NewTailBuffer(tail)}
	var pr *io.PipeReader
	var pw *io.PipeWriter
	if cmd.Stdout == nil || cmd.Stderr == nil {
		pr, pw = io.Pipe()
		if cmd.Stdout == nil {
			cmd.Stdout = pw
		}
		if cmd.Stderr == nil {
			cmd.Stderr = pw
		}
	}
	if err := cmd.Start(); err != nil {
		if pw != nil {
			pw.Close()
		}
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	var scanned sync.WaitGroup
	if pr != nil {
		scanned.Go(func() {
			sc := bufio.NewScanner(pr)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				c.Logs.Add(line)
				if onLine != nil {
					onLine(line)
				}
			}
			_, _ = io.Copy(io.Discard, pr) // a line too long for the scanner
		})
	}
	go func() {
		_ = cmd.Wait()
		if pw != nil {
			pw.Close()
		}
		scanned.Wait()
		close(c.Exited)
	}()
	return c, nil
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.Cmd.Process.Pid }

// Alive reports whether the child is still running.
func (c *Child) Alive() bool {
	select {
	case <-c.Exited:
		return false
	default:
		return true
	}
}

// Stop ends the child: its Stdin closed, then Terminate with StopGrace. A
// nil Child is stopped already.
func (c *Child) Stop() {
	if c == nil {
		return
	}
	if c.Stdin != nil {
		c.Stdin.Close()
	}
	Terminate(c.Cmd.Process, c.Exited, StopGrace)
}

// Failure describes a child that did not come up: how it ended (or that it
// still runs) and its last lines of output.
func (c *Child) Failure(what string) error {
	state := "still running"
	if !c.Alive() {
		state = c.Cmd.ProcessState.String()
	}
	return fmt.Errorf("%s: %s (%s); its last output:\n%s", c.Name, what, state, c.Logs)
}

// TailBuffer keeps the last n lines written to it (by Add, or by Write,
// which splits what it is given at newlines), for the error that reports a
// child process that failed. It is safe for concurrent use.
type TailBuffer struct {
	mu    sync.Mutex
	n     int
	lines []string
}

// NewTailBuffer returns a TailBuffer of the last n lines (n ≥ 1).
func NewTailBuffer(n int) *TailBuffer { return &TailBuffer{n: max(n, 1)} }

// Add adds one line.
func (t *TailBuffer) Add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > t.n {
		t.lines = t.lines[len(t.lines)-t.n:]
	}
}

// Write adds the lines of p (a trailing newline ends the last, it begins no
// empty one); it never fails.
func (t *TailBuffer) Write(p []byte) (int, error) {
	for line := range strings.SplitSeq(strings.TrimRight(string(p), "\n"), "\n") {
		t.Add(line)
	}
	return len(p), nil
}

// String returns the lines kept, joined by newlines.
func (t *TailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// FloorFlag is the hidden first argument that makes a benchmark's binary
// serve as its floor (the same transport with no decision behind it), so
// that the floor runs as a child process whose CPU time is read as the
// agent's is.
const FloorFlag = "-serve-floor"

// IsFloor reports whether args (os.Args[1:]) ask for the floor: FloorFlag,
// with one dash or two.
func IsFloor(args []string) bool {
	return len(args) > 0 && (args[0] == FloorFlag || args[0] == "-"+FloorFlag)
}

// AgentStarted is the message of the JSON log line the agent writes once
// its listeners are up, with their addresses ("http", "socket", …).
const AgentStarted = "obol agent started"

// StartedField returns the string field name of line when line is the
// agent's AgentStarted log line ("" when the field is absent or not a
// string), and whether it is.
func StartedField(line, name string) (string, bool) {
	if !strings.Contains(line, AgentStarted) {
		return "", false
	}
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != AgentStarted {
		return "", false
	}
	s, _ := m[name].(string)
	return s, true
}
