package rls

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocConfigs parses every YAML block of docs/envoy.md that is a rate
// limit config (a file, or a descriptor list): the docs' examples load.
func TestDocConfigs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "envoy.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(b), "```yaml\n")[1:]
	n := 0
	for i, blk := range blocks {
		blk = blk[:strings.Index(blk, "```")]
		switch {
		case strings.HasPrefix(blk, "domain:"):
		case strings.HasPrefix(blk, "  - key:"):
			blk = "domain: doc\ndescriptors:\n" + blk
		default:
			continue
		}
		n++
		if _, err := Parse([]Source{{Name: "block" + string(rune('0'+i)), Data: []byte(blk)}}); err != nil {
			t.Errorf("docs/envoy.md block %d does not load: %v\n%s", i, err, blk)
		}
	}
	if n < 2 {
		t.Fatalf("found %d config blocks in docs/envoy.md, want the file example and the extension example", n)
	}
}
