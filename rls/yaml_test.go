package rls

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// Anchors, aliases and merge keys are read as envoyproxy/ratelimit's YAML
// library reads them: an alias is a copy of the value it names, a merge
// key brings the entries the mapping does not set itself.
func TestParseAliasesAndMergeKeys(t *testing.T) {
	const src = `domain: d
descriptors:
  - key: a
    rate_limit: &rl {unit: minute, requests_per_unit: 5}
  - key: b
    rate_limit: *rl
  - key: c
    rate_limit:
      <<: *rl
      requests_per_unit: 7
  - key: nested
    descriptors: &plans
      - {key: plan, value: free, rate_limit: {unit: hour, requests_per_unit: 10}}
      - {key: plan, rate_limit: {unit: hour, requests_per_unit: 100}}
  - key: other
    descriptors: *plans
  - key: smooth
    rate_limit: {unit: second, requests_per_unit: 10, obol: &g {kind: gcra, burst: 2}}
  - key: smooth2
    rate_limit: {unit: second, requests_per_unit: 10, obol: {<<: *g, burst: 3}}
`
	cfg, err := Parse([]Source{{Name: "a.yaml", Data: []byte(src)}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range cfg.Limits() {
		s := fmt.Sprintf("%d/%ds", l.Requests, l.Seconds)
		if l.Ext != nil {
			s += fmt.Sprintf(" %s burst %d", l.Ext.Kind, l.Ext.Burst)
		}
		got[l.Path] = s
	}
	want := map[string]string{
		"d.a": "5/60s", "d.b": "5/60s", "d.c": "7/60s",
		"d.nested.plan_free": "10/3600s", "d.nested.plan": "100/3600s",
		"d.other.plan_free": "10/3600s", "d.other.plan": "100/3600s",
		"d.smooth": "10/1s gcra burst 2", "d.smooth2": "10/1s gcra burst 3",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("limits:\n%v\nwant\n%v", got, want)
	}
	if cfg.Limits()[0].PB == cfg.Limits()[1].PB {
		t.Fatal("two descriptors share one limit")
	}
}

func TestParseAliasProblems(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"an alias reused as a descriptor is a duplicate", "domain: d\ndescriptors:\n  - &k {key: k}\n  - *k\n",
			[]string{"a.yaml:4: duplicate descriptor composite key 'd.k'"}},
		{"a merge key of a scalar", "domain: d\ndescriptors:\n  - key: k\n    <<: 5\n",
			[]string{`a.yaml:4: descriptor: a merge key (<<) takes a mapping or a list of mappings, got "5"`}},
		{"a merged key that is unknown", "domain: d\ndescriptors:\n  - key: k\n    <<: {valu: v}\n",
			[]string{`a.yaml:4: descriptor: unknown key "valu"`}},
		{"a duplicate key", "domain: d\ndomain: e\n",
			[]string{`a.yaml:2: the file: key "domain" given twice`}},
		{"an alias inside the value it names", "domain: d\ndescriptors: &l\n  - key: k\n    descriptors: *l\n",
			[]string{`a.yaml:4: the alias "*l" lies inside the value it names`}},
		{"a merge key inside the mapping it names", "domain: d\ndescriptors:\n  - &m {key: k, <<: *m}\n",
			[]string{`a.yaml:3: the alias "*m" lies inside the value it names`}},
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
}

// aliasBomb is a file of a few kilobytes whose aliases nest ten lists of
// ten descriptors nine deep: a billion descriptors once expanded.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("domain: bomb\ndescriptors:\n")
	for lvl := 0; lvl < 9; lvl++ {
		fmt.Fprintf(&b, "  - key: l%d\n    descriptors: &l%d [", lvl, lvl)
		for i := 0; i < 10; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			if lvl == 0 {
				fmt.Fprintf(&b, "{key: k%d, rate_limit: {unit: second, requests_per_unit: 1}}", i)
			} else {
				fmt.Fprintf(&b, "{key: k%d, descriptors: *l%d}", i, lvl-1)
			}
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// An alias bomb is refused with a problem naming the file and the line
// where the walk gave up, within the budget: no hang, no memory running
// away.
func TestParseAliasBomb(t *testing.T) {
	src := aliasBomb()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Parse([]Source{{Name: "bomb.yaml", Data: []byte(src)}})
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("an alias bomb was accepted")
	}
	if !strings.Contains(err.Error(), "bomb.yaml:") || !strings.Contains(err.Error(), ": file too large: its aliases expand to more than") {
		t.Fatalf("no problem naming the file and its size: %v", err)
	}
	if strings.Contains(err.Error(), "bomb.yaml:0:") {
		t.Fatalf("a problem without a line: %v", err)
	}
	// The budget is about 100,000 values: a few tens of megabytes at most,
	// where the expanded file would take hundreds of gigabytes.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Fatalf("Parse allocated %d MiB", alloc>>20)
	}
	t.Logf("%d bytes of YAML, %d KiB allocated, %s", len(src), (after.TotalAlloc-before.TotalAlloc)>>10, strings.SplitN(err.Error(), "\n", 3)[1])
}
