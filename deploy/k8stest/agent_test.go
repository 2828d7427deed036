package k8stest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// binDir holds what the tests build (the agent); TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "k8stest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// repoRoot returns the obol repository this module sits in: two levels
// up, where the agent's go.mod is.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(mod, []byte("module github.com/obol-dev/obol\n")) {
		t.Fatalf("%s is not the obol repository (go.mod: %v)", root, err)
	}
	return root
}

var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
)

// agentBinary builds the agent from the repository, once per test run.
func agentBinary(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	agentOnce.Do(func() {
		out := filepath.Join(binDir, "agent")
		cmd := exec.Command("go", "build", "-o", out, "./cmd/agent")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			agentErr = fmt.Errorf("go build ./cmd/agent: %v\n%s", err, b)
			return
		}
		agentPath = out
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentPath
}

// logLines decodes the agent's JSON log lines; other lines are skipped.
func logLines(b []byte) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}
