package config

import (
	"encoding/json"
	"testing"
)

// benchProblems is a file with a problem of each sort: an unknown key with a
// suggestion, a field of another kind, a missing required field, a value out
// of range, a bad enum and an override field of another kind.
const benchProblems = `
resources:
  a/t: {kind: tiers, tiers: "5,1,1,0", hard_limt: 3, burst: 2, domains: {d: {burst: 1}}}
  a/g: {kind: gcra, burst: 0, count: 1}
  a/a: {kind: adaptive, min_window: 5, max_window: 2, rules: predictve}
  a/p: {kind: pacer, quota: 10, period: 1s, strategy: keep_reserve, multiplier: 2}
`

// BenchmarkParse measures Parse on a valid file (the default one, with a
// resource of each kind) and on a file with a problem of each sort. A config
// is parsed on start and on each reload.
func BenchmarkParse(b *testing.B) {
	for _, bm := range []struct {
		name  string
		src   []byte
		valid bool
	}{
		{name: "default", src: DefaultYAML(), valid: true},
		{name: "design", src: []byte(designExample), valid: true},
		{name: "problems", src: []byte(benchProblems)},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(bm.src); (err == nil) != bm.valid {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMarshal measures rendering the default config in the file schema
// (GET /v1/config).
func BenchmarkMarshal(b *testing.B) {
	c := Default()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(c); err != nil {
			b.Fatal(err)
		}
	}
}
