package yamlnode

import "testing"

// BenchmarkMapping measures reading a mapping of twelve keys, four of them
// brought by a merge key, as config and rls read each mapping of a file.
func BenchmarkMapping(b *testing.B) {
	root, w, _ := parse(b, "base: &b {a: 1, b: 2, c: 3, d: 4}\nm: {<<: *b, e: 5, f: 6, g: 7, h: 8, i: 9, j: 10, k: 11, l: 12}\n")
	m := w.Deref(w.Child(root, "m", -1))
	b.ReportAllocs()
	for b.Loop() {
		w.left = 1 << 30
		if es, ok := w.Mapping(m, func(Problem) {}); !ok || len(es) != 12 {
			b.Fatal(len(es), ok)
		}
	}
}
