package yamlnode

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// parse returns the root of src and a walker of it that collects the
// document's problems.
func parse(t testing.TB, src string) (*yaml.Node, *Walker, *[]Problem) {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	root := doc.Content[0]
	var probs []Problem
	return root, New(root, len(src), func(p Problem) { probs = append(probs, p) }), &probs
}

// show writes problems as "issue@line", for comparing.
func show(ps []Problem) string {
	var out []string
	for _, p := range ps {
		s := fmt.Sprintf("%d@%d", p.Issue, p.Node.Line)
		if p.First != nil {
			s += fmt.Sprintf("(first@%d)", p.First.Line)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestMapping(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		path      []string // keys from the root to the mapping read, each a mapping
		want      string   // key=value, in order
		problems  string   // show's
	}{
		{name: "plain", src: "a: 1\nb: 2\n", want: "a=1 b=2"},
		{name: "explicit keys win over merged ones", path: []string{"m"},
			src:  "base: &b {a: 1, b: 2}\nm: {b: 3, <<: *b, c: 4}\n",
			want: "b=3 c=4 a=1"},
		{name: "earlier merged mappings win", path: []string{"m"},
			src:  "x: &x {a: 1}\ny: &y {a: 2, b: 2}\nm: {<<: [*x, *y]}\n",
			want: "a=1 b=2"},
		{name: "nested merges", path: []string{"m"},
			src:  "x: &x {a: 1}\ny: &y {<<: *x, b: 2}\nm: {<<: *y}\n",
			want: "b=2 a=1"},
		{name: "an alias key", src: "k: &k a\n*k : 1\n", want: "k=a a=1"},
		{name: "a duplicate key", src: "a: 1\nb: 2\na: 3\n", want: "a=1 b=2",
			problems: fmt.Sprintf("%d@3(first@1)", DuplicateKey)},
		{name: "a duplicate key in a large mapping", src: func() string {
			var b strings.Builder
			for i := 0; i < 40; i++ {
				fmt.Fprintf(&b, "k%d: %d\n", i, i)
			}
			return b.String() + "k7: x\n"
		}(), want: "", problems: fmt.Sprintf("%d@41(first@8)", DuplicateKey)},
		{name: "keys that are not strings", src: "[a]: 1\n~: 2\nb: 3\n", want: "b=3",
			problems: fmt.Sprintf("%d@1 %d@2", KeyNotString, KeyNotString)},
		{name: "a merge key of a scalar and of a list holding one", src: "<<: 5\nx: 1\n", want: "x=1",
			problems: fmt.Sprintf("%d@1", BadMerge)},
		{name: "a merge key of a list holding a scalar", src: "<<: [{a: 1}, 6]\n", want: "a=1",
			problems: fmt.Sprintf("%d@1", BadMerge)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, w, _ := parse(t, tc.src)
			for _, k := range tc.path {
				n = w.Deref(w.Child(n, k, -1))
			}
			var probs []Problem
			es, ok := w.Mapping(n, func(p Problem) { probs = append(probs, p) })
			if !ok {
				t.Fatal("not ok")
			}
			var got []string
			for _, e := range es {
				v := w.Deref(e.V)
				got = append(got, e.Key+"="+v.Value)
			}
			if tc.want != "" && strings.Join(got, " ") != tc.want {
				t.Errorf("entries %s, want %s", strings.Join(got, " "), tc.want)
			}
			if s := show(probs); s != tc.problems {
				t.Errorf("problems %q, want %q", s, tc.problems)
			}
		})
	}
}

func TestDeepMerge(t *testing.T) {
	var b strings.Builder
	b.WriteString("m0: &m0 {a: 1}\n")
	for i := 1; i <= MaxMergeDepth+1; i++ {
		fmt.Fprintf(&b, "m%d: &m%d {<<: *m%d}\n", i, i, i-1)
	}
	root, w, _ := parse(t, b.String())
	for _, tc := range []struct {
		key  string
		want string
	}{
		{fmt.Sprintf("m%d", MaxMergeDepth), "a"},
		{fmt.Sprintf("m%d", MaxMergeDepth+1), ""},
	} {
		var probs []Problem
		es, _ := w.Mapping(w.Deref(w.Child(root, tc.key, -1)), func(p Problem) { probs = append(probs, p) })
		got := ""
		for _, e := range es {
			got += e.Key
		}
		if got != tc.want || (tc.want == "") != (len(probs) == 1 && probs[0].Issue == DeepMerge) {
			t.Errorf("%s: keys %q, problems %v", tc.key, got, show(probs))
		}
	}
}

func TestCycles(t *testing.T) {
	for _, tc := range []struct {
		src, want string
	}{
		{"a: &a {b: *a}\n", fmt.Sprintf("%d@1", Cycle)},
		{"a: &a {<<: *a, x: 1}\n", fmt.Sprintf("%d@1", Cycle)},
		{"a: &a\n  - x\n  - [*a]\nb: *a\n", fmt.Sprintf("%d@3", Cycle)},
		{"a: &a [x]\nb: [*a, *a]\n", ""},
	} {
		root, w, probs := parse(t, tc.src)
		if s := show(*probs); s != tc.want {
			t.Errorf("%q: problems %q, want %q", tc.src, s, tc.want)
		}
		walkAll(w, root, 0) // ends
	}
}

func TestBudget(t *testing.T) {
	// Ten lists of ten nested nine deep: a billion values from 400 bytes.
	var b strings.Builder
	b.WriteString("l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 9)+fmt.Sprintf("*l%d", i-1))
	}
	root, w, probs := parse(t, b.String())
	budget := w.Left()
	if want := Budget(1<<30, len(b.String())); budget > want || budget < 100_000 {
		t.Fatalf("budget %d, want between 100000 and %d", budget, want)
	}
	visits := walkAll(w, root, 0)
	if !w.Spent() || len(*probs) != 1 || (*probs)[0].Issue != TooLarge {
		t.Fatalf("spent %v, problems %s", w.Spent(), show(*probs))
	}
	if visits > budget+1 {
		t.Fatalf("%d values visited, budget %d", visits, budget)
	}
	if w.Deref(root) != nil || w.Expand(root) != nil {
		t.Fatal("a spent walker still walks")
	}
	if len(*probs) != 1 {
		t.Fatalf("TooLarge reported %d times", len(*probs))
	}
}

// walkAll visits every value under n, aliases and merge keys followed,
// and returns how many values it visited.
func walkAll(w *Walker, n *yaml.Node, depth int) int {
	n = w.Deref(n)
	if n == nil || depth > 200 {
		return 0
	}
	visits := 1
	switch n.Kind {
	case yaml.MappingNode:
		es, _ := w.Mapping(n, func(Problem) {})
		for _, e := range es {
			visits += walkAll(w, e.V, depth+1)
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			visits += walkAll(w, c, depth+1)
		}
	}
	return visits
}

func TestChild(t *testing.T) {
	root, w, _ := parse(t, "base: &b {x: 1}\nm:\n  <<: *b\n  l: [a, b]\ncyc: &c {<<: *c}\n")
	m := w.Child(root, "m", -1)
	if c := w.Child(m, "x", -1); c == nil || c.Value != "1" {
		t.Errorf("merged x: %v", c)
	}
	if c := w.Child(w.Child(m, "l", -1), "", 1); c == nil || c.Value != "b" || c.Line != 4 {
		t.Errorf("l[1]: %v", c)
	}
	if c := w.Child(m, "", 0); c != nil {
		t.Errorf("an index into a mapping: %v", c)
	}
	if c := w.Child(w.Child(root, "cyc", -1), "y", -1); c != nil {
		t.Errorf("through a cycle: %v", c)
	}
}

func TestExpand(t *testing.T) {
	root, w, _ := parse(t, "t: &t {a: 1}\nr: {x: *t, y: [*t, *t], <<: *t}\n")
	e := w.Expand(w.Child(root, "r", -1))
	out, err := yaml.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	a := map[string]any{"a": 1}
	if want := (map[string]any{"x": a, "y": []any{a, a}, "a": 1}); !reflect.DeepEqual(got, want) {
		t.Fatalf("expanded:\n%s\nreads %v, want %v", out, got, want)
	}
	if strings.Contains(string(out), "&") || strings.Contains(string(out), "*") {
		t.Fatalf("anchors or aliases left:\n%s", out)
	}
}

// Merge keys of lists of aliases, 60 deep: 2⁶⁰ mappings to look into for a
// key that is not there. Child gives up instead.
func TestChildGivesUp(t *testing.T) {
	var b strings.Builder
	b.WriteString("m0: &m0 {a: 1}\n")
	for i := 1; i <= 60; i++ {
		fmt.Fprintf(&b, "m%d: &m%d {<<: [*m%d, *m%d]}\n", i, i, i-1, i-1)
	}
	root, w, _ := parse(t, b.String())
	m := w.Child(root, "m60", -1)
	if c := w.Child(m, "missing", -1); c != nil {
		t.Fatalf("found %v", c)
	}
	if c := w.Child(m, "a", -1); c == nil || c.Value != "1" {
		t.Fatalf("a: %v", c)
	}
}
