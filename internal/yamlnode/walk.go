// The walker: aliases followed within a budget, cyclic ones refused, and
// the entries of a mapping with merge keys applied and duplicate keys
// found.

package yamlnode

import (
	"cmp"
	"slices"

	"go.yaml.in/yaml/v3"
)

// MaxMergeDepth is how deep merge keys may nest (a merge key's mapping
// holding a merge key, and so on): 100. A deeper one is reported as
// DeepMerge and not followed.
const MaxMergeDepth = 100

// maxAliasHops bounds an alias chain; yaml.v3 never makes one longer than
// a hop (an alias cannot carry an anchor), the bound is a guard.
const maxAliasHops = 100

// Budget returns how many values a walk may visit in a document of nodes
// nodes and size bytes: 100,000 plus four per node, at most four per byte.
// Without aliases a walk visits each node about once, so the budget only
// stops documents whose aliases multiply their values; counting nodes
// rather than bytes, a file padded with comments or long strings buys no
// room for them.
func Budget(nodes, size int) int { return 100_000 + 4*min(nodes, size) }

// Issue is the sort of a Problem.
type Issue int

// The issues a walk reports.
const (
	// Cycle: Node is an alias inside the value it names (Node.Alias).
	Cycle Issue = iota + 1
	// TooLarge: the budget ran out at Node.
	TooLarge
	// KeyNotString: Node, a mapping's key, is not a string (a non-null
	// scalar).
	KeyNotString
	// DuplicateKey: Node repeats the key First, of the same mapping.
	DuplicateKey
	// BadMerge: Node, the value (or an item of the list) of a merge key,
	// is not a mapping.
	BadMerge
	// DeepMerge: Node, a merge key's value, nests deeper than
	// MaxMergeDepth.
	DeepMerge
)

// Problem is one thing a walk found wrong.
type Problem struct {
	Issue Issue
	Node  *yaml.Node
	First *yaml.Node // DuplicateKey: the key's first occurrence
}

// Walker walks one document. It is not safe for concurrent use.
type Walker struct {
	left   int                 // values left to visit
	spent  bool                // the budget ran out (reported once)
	cyclic map[*yaml.Node]bool // aliases inside the value they name
	report func(Problem)       // the document's Cycle and TooLarge
}

// New returns a walker of the document root (nil for none), size bytes
// long, with a budget of Budget(nodes, size) values (Left tells it).
// report receives the document's problems that lie on no mapping: every
// Cycle at once, and TooLarge when the budget runs out.
func New(root *yaml.Node, size int, report func(Problem)) *Walker {
	cyclic, nodes := cycles(root)
	w := &Walker{left: Budget(nodes, size), cyclic: cyclic, report: report}
	for _, a := range sortedByLine(w.cyclic) {
		report(Problem{Issue: Cycle, Node: a})
	}
	return w
}

// cycles finds the aliases of root that lie inside the value they name,
// and counts root's nodes: one depth-first pass, aliases not followed,
// keeping the anchored nodes open on the way down. The depth is yaml.v3's
// nesting, which it bounds.
func cycles(root *yaml.Node) (found map[*yaml.Node]bool, nodes int) {
	var open map[*yaml.Node]bool // made at the first anchor
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n == nil {
			return
		}
		nodes++
		if n.Kind == yaml.AliasNode {
			if open[n.Alias] {
				if found == nil {
					found = map[*yaml.Node]bool{}
				}
				found[n] = true
			}
			return
		}
		if n.Anchor != "" {
			if open == nil {
				open = map[*yaml.Node]bool{}
			}
			open[n] = true
			defer delete(open, n)
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(root)
	return found, nodes
}

// sortedByLine returns the keys of set in document order.
func sortedByLine(set map[*yaml.Node]bool) []*yaml.Node {
	out := make([]*yaml.Node, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *yaml.Node) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	return out
}

// Left returns how many values the walk may still visit; below zero once
// the budget is spent.
func (w *Walker) Left() int { return w.left }

// Spent reports whether the budget ran out: the walk has given up, and
// what it returned since is incomplete.
func (w *Walker) Spent() bool { return w.spent }

// follow follows n's aliases without charging the budget; nil for a
// cyclic alias or a chain that does not end.
func (w *Walker) follow(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i == maxAliasHops || w.cyclic[n] {
			return nil
		}
		n = n.Alias
	}
	return n
}

// Deref follows n's alias (if it is one) to the value it names and
// charges one value to the budget. It returns nil for nil, for a cyclic
// alias (reported by New) and once the budget is spent (reported once, as
// TooLarge at the node where it ran out).
func (w *Walker) Deref(n *yaml.Node) *yaml.Node {
	n = w.follow(n)
	if n == nil {
		return nil
	}
	w.left--
	if w.left < 0 {
		if !w.spent {
			w.spent = true
			w.report(Problem{Issue: TooLarge, Node: n})
		}
		return nil
	}
	return n
}

// Entry is one key of a mapping and its value.
type Entry struct {
	Key string
	K   *yaml.Node // the key (aliases followed)
	V   *yaml.Node // the value as written (an alias is not followed)
}

// Mapping returns the entries of n, a mapping node (aliases followed), in
// the order written, followed by those its merge keys (<<) bring that it
// does not set itself: the value of a merge key is a mapping or a list of
// them, earlier ones winning. report receives the mapping's problems: a
// key that is not a string, a duplicate key (the first one is kept), a
// merge key of something else than mappings, merges nested too deep;
// those entries are left out. ok is false when the budget ran out (or a
// key was a cyclic alias): the entries are then incomplete.
func (w *Walker) Mapping(n *yaml.Node, report func(Problem)) (entries []Entry, ok bool) {
	return w.mapping(n, report, 0)
}

func (w *Walker) mapping(n *yaml.Node, report func(Problem), depth int) ([]Entry, bool) {
	var seen map[string]*yaml.Node // only for large mappings; small ones scan es
	if len(n.Content) > 32 {
		seen = make(map[string]*yaml.Node, len(n.Content)/2)
	}
	var merged []Entry
	var have map[string]bool // the keys of merged
	es := make([]Entry, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := w.Deref(n.Content[i]), n.Content[i+1]
		if k == nil {
			return nil, false
		}
		if IsMerge(k) {
			if have == nil {
				have = map[string]bool{}
			}
			merged = w.merge(v, report, depth, merged, have)
			continue
		}
		if k.Kind != yaml.ScalarNode || IsNull(k) {
			report(Problem{Issue: KeyNotString, Node: k})
			continue
		}
		if first := lookup(es, seen, k.Value); first != nil {
			report(Problem{Issue: DuplicateKey, Node: k, First: first})
			continue
		}
		if seen != nil {
			seen[k.Value] = k
		}
		es = append(es, Entry{Key: k.Value, K: k, V: v})
	}
	explicit := len(es)
	for _, e := range merged {
		if lookup(es[:explicit], seen, e.Key) == nil {
			es = append(es, e)
		}
	}
	return es, true
}

// lookup returns the key node of key among es, through seen when it is
// not nil, or nil.
func lookup(es []Entry, seen map[string]*yaml.Node, key string) *yaml.Node {
	if seen != nil {
		return seen[key]
	}
	for i := range es {
		if es[i].Key == key {
			return es[i].K
		}
	}
	return nil
}

// merge adds to merged the entries of a merge key's value v (a mapping or
// a list of them; earlier ones win) whose keys it does not hold yet (have).
func (w *Walker) merge(v *yaml.Node, report func(Problem), depth int, merged []Entry, have map[string]bool) []Entry {
	if depth >= MaxMergeDepth {
		report(Problem{Issue: DeepMerge, Node: v})
		return merged
	}
	v = w.Deref(v)
	if v == nil {
		return merged
	}
	srcs := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		srcs = v.Content
	}
	for _, s := range srcs {
		s2 := w.Deref(s)
		if s2 == nil {
			return merged
		}
		if s2.Kind != yaml.MappingNode {
			report(Problem{Issue: BadMerge, Node: s2})
			continue
		}
		es, _ := w.mapping(s2, report, depth+1)
		for _, e := range es {
			if !have[e.Key] {
				have[e.Key] = true
				merged = append(merged, e)
			}
		}
	}
	return merged
}

// Child returns the value under key in the mapping n (merge keys
// followed) or at idx (≥ 0) in the sequence n, or nil. Aliases are
// followed (cyclic ones are not) without charging the budget: it finds a
// value again for a message, after the walk. It looks into at most
// maxChildSteps mappings, then gives up (nil).
func (w *Walker) Child(n *yaml.Node, key string, idx int) *yaml.Node {
	steps := maxChildSteps
	return w.child(n, key, idx, 0, &steps)
}

// maxChildSteps bounds the mappings one Child looks into: merge keys of
// lists of aliases can make their number exponential in the depth.
const maxChildSteps = 10_000

func (w *Walker) child(n *yaml.Node, key string, idx int, depth int, steps *int) *yaml.Node {
	n = w.follow(n)
	if n == nil || depth > MaxMergeDepth || *steps <= 0 {
		return nil
	}
	*steps--
	switch n.Kind {
	case yaml.SequenceNode:
		if idx >= 0 && idx < len(n.Content) {
			return n.Content[idx]
		}
	case yaml.MappingNode:
		if idx >= 0 {
			return nil
		}
		var merges []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := w.follow(n.Content[i])
			if k == nil {
				continue
			}
			if IsMerge(k) {
				merges = append(merges, n.Content[i+1])
			} else if k.Kind == yaml.ScalarNode && k.Value == key {
				return n.Content[i+1]
			}
		}
		for _, m := range merges {
			m = w.follow(m)
			srcs := []*yaml.Node{m}
			if m != nil && m.Kind == yaml.SequenceNode {
				srcs = m.Content
			}
			for _, src := range srcs {
				if c := w.child(src, key, -1, depth+1, steps); c != nil {
					return c
				}
			}
		}
	}
	return nil
}

// Expand returns a copy of n in which every alias is replaced by a copy of
// the value it names and no node carries an anchor: a tree that can be
// written out on its own (yaml.Marshal) and read back. Every node copied
// is charged to the budget; nil once it is spent or at a cyclic alias.
func (w *Walker) Expand(n *yaml.Node) *yaml.Node {
	n = w.Deref(n)
	if n == nil {
		return nil
	}
	c := *n
	c.Anchor = ""
	if IsMerge(n) {
		c.Tag = "" // written as a plain << (the encoder spells the tag out)
	}
	if len(n.Content) > 0 {
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, e := range n.Content {
			if c.Content[i] = w.Expand(e); c.Content[i] == nil {
				return nil
			}
		}
	}
	return &c
}

// IsNull reports whether n is the null scalar.
func IsNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// IsMerge reports whether n, a mapping's key, is the merge key <<.
func IsMerge(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!merge"
}
