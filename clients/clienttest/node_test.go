package clienttest

// The TypeScript client's suite (clients/node), run from go test: it
// builds the agent, installs the package's pinned dev dependencies with
// npm ci (which also compiles the TypeScript) and runs npm test with the
// agent's path in OBOL_AGENT_BIN.

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nodeInstall says how to get what the suite needs.
const nodeInstall = "install Node.js 18 or later and npm (Debian: apt-get install nodejs npm; or run .ci/node as root)"

// offline matches npm's messages when the registry cannot be reached.
var offline = regexp.MustCompile(`ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET|network request|getaddrinfo|socket hang up`)

func TestNodeClient(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the Node client's suite installs packages and starts agents")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found: " + nodeInstall)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm not found: " + nodeInstall)
	}
	out, err := exec.Command(node, "-p", "process.versions.node").Output()
	if err != nil {
		t.Skipf("node -p process.versions.node failed (%v): %s", err, nodeInstall)
	}
	ver := strings.TrimSpace(string(out))
	if major, _ := strconv.Atoi(strings.SplitN(ver, ".", 2)[0]); major < 18 {
		t.Skipf("node %s is older than 18: %s", ver, nodeInstall)
	}

	dir, err := filepath.Abs(filepath.Join("..", "node"))
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "..", "..")
	bin := filepath.Join(t.TempDir(), "agent")
	build := exec.Command("go", "build", "-o", bin, "./cmd/agent")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/agent: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, npm, args...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), "OBOL_AGENT_BIN="+bin, "npm_config_fund=false", "npm_config_audit=false", "npm_config_update_notifier=false"), vectorsEnv()...)
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		err := cmd.Run()
		return buf.Bytes(), err
	}
	if out, err := run("ci", "--no-progress"); err != nil {
		if offline.Match(out) {
			t.Skipf("npm ci could not reach the npm registry (the suite's dev dependencies come from it): %v\n%s", err, tail(out))
		}
		t.Fatalf("npm ci in clients/node: %v\n%s", err, out)
	}
	if out, err := run("test"); err != nil {
		t.Fatalf("npm test in clients/node: %v\n%s", err, out)
	} else if testing.Verbose() {
		t.Logf("%s", tail(out))
	}
}

// tail is the last lines of a command's output.
func tail(b []byte) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}
