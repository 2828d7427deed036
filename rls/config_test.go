package rls

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseProblems(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"not yaml", "domain: [", []string{"a.yaml: not YAML"}},
		{"empty", "", []string{"a.yaml: empty file"}},
		{"no domain", "descriptors: []", []string{"a.yaml:1: config file cannot have empty domain"}},
		{"unknown keys", "domain: d\nextra: 1\ndescriptors:\n  - key: k\n    valu: v\n", []string{
			`a.yaml:2: the file: unknown key "extra"`, `a.yaml:5: descriptor: unknown key "valu"`}},
		{"every descriptor problem", `domain: d
descriptors:
  - key: k
    rate_limit: {unit: fortnight, requests_per_unit: 1}
  - key: k
  - value: v
  - key: u
    rate_limit: {unlimited: true, unit: second}
  - key: n
    rate_limit: {unit: second, requests_per_unit: -1, name: a, replaces: [{name: a}, {name: ""}]}
  - key: s
    value: plain
    share_threshold: true
  - key: b
    shadow_mode: maybe
`, []string{
			"a.yaml:4: invalid rate limit unit 'fortnight'",
			"a.yaml:5: duplicate descriptor composite key 'd.k'",
			"a.yaml:6: descriptor has empty key",
			"a.yaml:8: should not specify rate limit unit when unlimited",
			"a.yaml:10: requests_per_unit: want an integer in [0, 4294967295], got \"-1\"",
			"a.yaml:10: replaces should not contain name of same descriptor",
			"a.yaml:10: should not have an empty replaces entry",
			"a.yaml:11: share_threshold can only be used with wildcard values (ending with '*'), but found key 's_plain'",
			`a.yaml:15: shadow_mode: want true or false, got "maybe"`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]Source{{Name: "a.yaml", Data: []byte(tc.yaml)}})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nlacks %q", err, w)
				}
			}
		})
	}
	_, err := Parse([]Source{{Name: "a.yaml", Data: []byte("domain: d")}, {Name: "b.yaml", Data: []byte("domain: d")}})
	if err == nil || !strings.Contains(err.Error(), `b.yaml:1: duplicate domain "d" in config file (also in a.yaml)`) {
		t.Fatalf("duplicate domain: %v", err)
	}
}

func TestParseUnits(t *testing.T) {
	for unit, secs := range map[string]int64{"second": 1, "MINUTE": 60, "hour": 3600, "Day": 86400, "week": 604800, "month": 2592000, "year": 31536000} {
		cfg, err := Parse([]Source{{Name: "a.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: " + unit + ", requests_per_unit: 1}\n")}})
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Limits()[0].Seconds; got != secs {
			t.Errorf("%s: %d s, want %d", unit, got, secs)
		}
	}
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_01_01")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(data, "a.yaml"), "domain: a\n")
	write(filepath.Join(dir, "b.yml"), "domain: b\n")
	write(filepath.Join(dir, ".hidden.yaml"), "not: read\n")
	write(filepath.Join(dir, "notes.txt"), "not read\n")
	if err := os.Symlink(filepath.Join("..2026_01_01", "a.yaml"), filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Domains() != 2 || strings.Join(cfg.Files(), ",") != "a.yaml,b.yml" {
		t.Fatalf("domains %d, files %v", cfg.Domains(), cfg.Files())
	}
	if _, err := LoadDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing directory loaded")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(testConfig))
	f.Add([]byte(extConfig))
	f.Add([]byte("domain: d\ndescriptors: [{key: k, rate_limit: {unit: second}}]"))
	f.Add([]byte("domain: d\ndescriptors:\n  - {key: a, rate_limit: &r {unit: second, requests_per_unit: 1}}\n  - {key: b, rate_limit: {<<: *r, obol: {kind: gcra}}}\n  - &d {key: c, descriptors: [*d]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse([]Source{{Name: "f.yaml", Data: data}})
		if err != nil {
			if !strings.Contains(err.Error(), "f.yaml") {
				t.Fatalf("a problem that names no file: %v", err)
			}
			return
		}
		for _, l := range cfg.Limits() {
			if !l.Unlimited && l.Seconds == 0 {
				t.Fatalf("a limit of no unit: %+v", l)
			}
		}
	})
}
