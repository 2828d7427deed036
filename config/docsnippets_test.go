package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/obol-dev/obol/config"
)

// TestDocConfigSnippetsLoad: every YAML block of README.md and docs/*.md
// that is an obol config (its top-level keys are the config's: resources,
// namespaces, agent, gossip; indented blocks are read as written, less
// their indent) loads with config.Parse. The rate limit service's blocks
// (domain: …) are rls's to check. A snippet that named a field the config
// lacks, or a value it refuses, once went unnoticed.
func TestDocConfigSnippetsLoad(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	files = append(files, filepath.Join("..", "README.md"))
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, block := range strings.Split(string(b), "```yaml\n")[1:] {
			body, _, ok := strings.Cut(block, "```")
			if !ok {
				t.Fatalf("%s: yaml block %d is not closed", f, i)
			}
			body = dedent(body)
			top := firstKey(body)
			switch top {
			case "resources", "namespaces", "agent", "gossip":
			default:
				continue // not an obol config (e.g. the rate limit service's)
			}
			n++
			if _, err := config.Parse([]byte(body)); err != nil {
				t.Errorf("%s: yaml block %d does not load: %v\n%s", f, i, err, body)
			}
		}
	}
	if n < 3 {
		t.Fatalf("found %d obol config blocks in the docs: the extraction is broken", n)
	}
}

// dedent removes the indent of the first non-empty line from every line.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			indent = len(l) - len(strings.TrimLeft(l, " "))
			break
		}
	}
	if indent <= 0 {
		return s
	}
	for i, l := range lines {
		if len(l) >= indent && strings.TrimSpace(l[:indent]) == "" {
			lines[i] = l[indent:]
		}
	}
	return strings.Join(lines, "\n")
}

// firstKey is the first top-level key of a YAML block, "" when none.
func firstKey(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, " ") {
			continue
		}
		k, _, _ := strings.Cut(l, ":")
		return strings.TrimSpace(k)
	}
	return ""
}
