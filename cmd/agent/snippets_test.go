package main

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

// TestDocSnippetsRun extracts every shell block of README.md and docs/*.md
// that talks to the agent with curl and runs it, as written, against a live
// agent on the built-in config: the docs promise that their examples work
// as shown. The blocks of one file run in order on one agent (a later block
// may rely on an earlier one, as a reader's terminal would). A block fails
// when a command fails, when the agent answers 5xx or an error object the
// block does not announce, or when an output the block shows in a comment
// (`# {"granted":1,...}`) is not in what it printed.
func TestDocSnippetsRun(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: install it (apt-get install %s) to run the docs' examples", tool, tool)
		}
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	files = append([]string{filepath.Join("..", "..", "README.md")}, files...)
	ran := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks := curlBlocks(string(text))
		if len(blocks) == 0 {
			continue
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			sock := filepath.Join(tempDir(t), "obol.sock")
			a := startAgent(t, []string{"--socket", sock, "--http", "127.0.0.1:0"}, noEnv, sock)
			defer a.stop(t)
			for i, b := range blocks {
				runSnippet(t, f, i, b, sock)
				ran++
			}
		})
	}
	if ran == 0 {
		t.Fatal("no curl example found in README.md or docs/: the extraction is broken")
	}
}

var fence = regexp.MustCompile("(?ms)^```(?:sh|bash|shell)\n(.*?)^```")

// curlBlocks returns the shell blocks that ask the agent something.
func curlBlocks(md string) []string {
	var out []string
	for _, m := range fence.FindAllStringSubmatch(md, -1) {
		if strings.Contains(m[1], "curl ") && strings.Contains(m[1], "--unix-socket") {
			out = append(out, m[1])
		}
	}
	return out
}

// expected matches an output shown in a comment: `# {"granted":1,...}`,
// possibly followed by a remark in parentheses. An output that varies from
// run to run is shown up to `...}`, and only its start is checked.
var expected = regexp.MustCompile(`(?m)^\s*# (\{.*?\})\s*(?:\(.*\))?\s*$`)

func runSnippet(t *testing.T, file string, i int, block, sock string) {
	t.Helper()
	script := strings.NewReplacer(
		"$XDG_RUNTIME_DIR/obol.sock", sock,
		"/run/obol/obol.sock", sock,
		"/tmp/obol-$(id -u)/obol.sock", sock,
		"/tmp/obol.sock", sock,
	).Replace(block)
	prelude := "set -euo pipefail\n" +
		// A connection refused, a timeout or a 5xx fails the command; a 4xx
		// is a documented answer and is judged from the body below.
		"curl() { local code; command curl -sS --max-time 5 -o \"$OBOL_OUT\" -w '%{http_code}' \"$@\" >\"$OBOL_CODE\"; " +
		"code=$(cat \"$OBOL_CODE\"); cat \"$OBOL_OUT\"; [ \"$code\" -lt 500 ] || { echo \"HTTP $code\" >&2; return 1; }; }\n"
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", prelude+script)
	cmd.Env = append(os.Environ(), "OBOL_OUT="+filepath.Join(dir, "out"), "OBOL_CODE="+filepath.Join(dir, "code"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String()
	where := file + " shell block " + strconv.Itoa(i+1)
	if err != nil {
		t.Errorf("%s failed: %v\nscript:\n%s\nstdout:\n%s\nstderr:\n%s", where, err, block, out, stderr.String())
		return
	}
	if strings.Contains(out, `{"error":`) && !strings.Contains(block, `"error"`) {
		t.Errorf("%s: the agent answered with an error the block does not show:\n%s\nscript:\n%s", where, out, block)
	}
	for _, m := range expected.FindAllStringSubmatch(block, -1) {
		want := strings.TrimSuffix(m[1], "...}")
		want = strings.TrimSuffix(want, ",")
		if !strings.Contains(out, want) {
			t.Errorf("%s: the block shows %s, but the agent printed:\n%s", where, m[1], out)
		}
	}
}
