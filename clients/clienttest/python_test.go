package clienttest

// The Python client's suite (clients/python/tests, unittest) run from go
// test: it builds the agent, hands its path to the suite in OBOL_AGENT_BIN
// and fails with the suite's output when the suite fails. Without Python 3.9
// or later it skips, saying how to install it.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// pythonSuiteTimeout bounds the whole suite (it takes seconds); past it the
// suite is killed and the test fails with what it printed.
const pythonSuiteTimeout = 5 * time.Minute

func TestPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: install Python 3.9 or later (Debian: apt-get install python3, or bash .ci/python as root) to run the Python client's tests")
	}
	out, err := exec.Command(py, "-c", "import sys; print(sys.version_info[:2] >= (3, 9))").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "True" {
		t.Skipf("%s is not Python 3.9 or later (%v: %s): install a newer python3 to run the Python client's tests", py, err, strings.TrimSpace(string(out)))
	}

	ctx, cancel := context.WithTimeout(context.Background(), pythonSuiteTimeout)
	defer cancel()
	agent := filepath.Join(t.TempDir(), "agent")
	build := exec.CommandContext(ctx, filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", agent, "./cmd/agent")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/agent: %v\n%s", err, out)
	}

	suite := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-v", "-s", "tests", "-t", ".")
	suite.Dir = filepath.Join("..", "python")
	suite.Env = append(append(os.Environ(), "OBOL_AGENT_BIN="+agent, "PYTHONDONTWRITEBYTECODE=1"), vectorsEnv()...)
	suite.WaitDelay = 5 * time.Second
	out, err = suite.CombinedOutput()
	if err != nil {
		t.Fatalf("the Python client's tests failed (%v); to run them alone: go build -o agent ./cmd/agent && cd clients/python && OBOL_AGENT_BIN=$PWD/../../agent python3 -m unittest discover -s tests -t .\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("%s", out)
	}
}
