package benchkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
