package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEFlagTable: every flag --help lists has a row in the README's
// flag table, with its environment variable, and a default the usage states
// as a plain value (a duration, a number, a word) appears in that row. The
// table once lacked every --rls-* flag and the listener bounds.
func TestREADMEFlagTable(t *testing.T) {
	var usage bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &usage, &usage); err == nil {
		t.Fatal("-h: no error, want the usage")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // flag name → its README row
	for _, line := range strings.Split(string(readme), "\n") {
		if m := regexp.MustCompile("^\\| `--([a-z0-9-]+)").FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
		}
	}
	// The usage: "  -name type\n    \ttext" per flag.
	flagLine := regexp.MustCompile(`^  -([a-z0-9-]+)`)
	plainDefault := regexp.MustCompile(`default ([0-9][0-9a-z.]*|off|on|info|obol|none)[;)]`)
	envName := regexp.MustCompile(`env (OBOL_[A-Z_]+)`)
	lines := strings.Split(usage.String(), "\n")
	n := 0
	for i := 0; i < len(lines); i++ {
		m := flagLine.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		name, text := m[1], ""
		for j := i + 1; j < len(lines) && !flagLine.MatchString(lines[j]); j++ {
			text += lines[j]
		}
		if name == "h" || name == "help" {
			continue
		}
		n++
		row, ok := rows[name]
		if !ok {
			t.Errorf("--%s is in --help but has no row in the README's flag table", name)
			continue
		}
		if e := envName.FindStringSubmatch(text); e != nil && !strings.Contains(row, e[1]) {
			t.Errorf("--%s: the README's row lacks its variable %s: %s", name, e[1], row)
		}
		if d := plainDefault.FindStringSubmatch(text); d != nil && !strings.Contains(row, d[1]) {
			t.Errorf("--%s: --help gives the default %q, the README's row does not: %s", name, d[1], row)
		}
	}
	if n < 30 {
		t.Fatalf("read %d flags from --help: the usage's format changed", n)
	}
	for name := range rows {
		if !strings.Contains(usage.String(), "  -"+name+" ") && !strings.Contains(usage.String(), "  -"+name+"\n") {
			t.Errorf("the README's flag table has --%s, which --help does not list", name)
		}
	}
}
