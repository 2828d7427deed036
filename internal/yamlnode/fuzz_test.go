package yamlnode

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzWalk walks any YAML document whole (aliases and merge keys
// followed), reads every scalar and expands it: no input panics, hangs or
// walks past its budget; the budget's problem comes at most once; an
// expansion holds no alias and no anchor. Seeds beyond these are in
// testdata/fuzz/FuzzWalk.
func FuzzWalk(f *testing.F) {
	for _, s := range []string{
		"a: 1\nb: [x, y]\n",
		"base: &b {a: 1, b: [1, 2]}\nm: {<<: *b, c: *b}\n",
		"a: &a {b: *a}\n",
		"l0: &l0 [x, x, x]\nl1: &l1 [*l0, *l0, *l0]\nl2: [*l1, *l1, *l1]\n",
		"? [a]\n: 1\n~: 2\n<<: 5\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var doc yaml.Node
		if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
			return
		}
		root := doc.Content[0]
		tooLarge := 0
		w := New(root, len(data), func(p Problem) {
			if p.Node == nil {
				t.Fatalf("a problem at no node: %+v", p)
			}
			if p.Issue == TooLarge {
				tooLarge++
			}
		})
		budget := w.Left()
		visits := readAll(w, root, 0)
		if visits > budget {
			t.Fatalf("%d values visited, budget %d", visits, budget)
		}
		if tooLarge > 1 || (tooLarge == 1) != w.Spent() {
			t.Fatalf("TooLarge reported %d times, spent %v", tooLarge, w.Spent())
		}
		_ = w.Child(root, "a", -1)
		_ = w.Child(root, "", 0)
		if w.Spent() {
			return
		}
		w2 := New(root, len(data), func(Problem) {})
		e := w2.Expand(root)
		if e == nil {
			return // a cycle or the budget
		}
		count := 0
		var check func(n *yaml.Node)
		check = func(n *yaml.Node) {
			count++
			if n.Kind == yaml.AliasNode || n.Anchor != "" {
				t.Fatalf("an expansion holds an alias or an anchor: %+v", n)
			}
			for _, c := range n.Content {
				check(c)
			}
		}
		check(e)
		if count > budget {
			t.Fatalf("an expansion of %d nodes, budget %d", count, budget)
		}
	})
}

// readAll is walkAll reading every scalar as each reader does.
func readAll(w *Walker, n *yaml.Node, depth int) int {
	n = w.Deref(n)
	if n == nil || depth > 200 {
		return 0
	}
	visits := 1
	switch n.Kind {
	case yaml.MappingNode:
		es, _ := w.Mapping(n, func(p Problem) {
			if p.Node == nil {
				panic("a problem at no node")
			}
		})
		for _, e := range es {
			visits += readAll(w, e.V, depth+1)
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			visits += readAll(w, c, depth+1)
		}
	case yaml.ScalarNode:
		_ = Describe(n)
		_, _ = Text(n, false)
		_, _ = Bool(n, true)
		_, _ = Int(n)
		_, _ = Number(n)
	}
	return visits
}
