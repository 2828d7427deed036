// The nodes: the decoder that walks a tree of YAML nodes, with the path of
// every value and the line of every problem, and its readers of mappings,
// lists and scalars.

package config

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// isNull reports whether n is the null scalar.
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// decoder walks a generic value tree into the config types, tracking the
// path of every value and collecting every problem.
type decoder struct {
	probs     []Problem
	bad       map[string]bool // paths with a decode problem: validation stays quiet there
	root      *yaml.Node      // the document, to find the line of a path
	rootPath  string          // the path of root ("" or "resource")
	budget    int             // values left to visit (aliases can multiply them)
	exhausted bool
}

// newDecoder returns a decoder for a document of size bytes. Without
// aliases a document has fewer values than bytes, so the budget only stops
// documents whose aliases multiply them.
func newDecoder(root *yaml.Node, rootPath string, size int) *decoder {
	return &decoder{bad: map[string]bool{}, root: root, rootPath: rootPath, budget: 100_000 + 4*size}
}

// fail records a problem at path and marks path bad.
func (d *decoder) fail(path string, n *yaml.Node, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.probs = append(d.probs, Problem{Path: path, Message: fmt.Sprintf(format, args...), Line: line})
	d.bad[path] = true
}

// note records a problem at path without marking it bad.
func (d *decoder) note(ps []Problem, n *yaml.Node) {
	for _, p := range ps {
		p.Line = n.Line
		d.probs = append(d.probs, p)
	}
}

// merge returns the decode problems plus those validation problems that do
// not lie under a path the decoder already found bad, with lines filled in.
func (d *decoder) merge(checked []Problem) []Problem {
	out := d.probs
	for _, p := range checked {
		if d.isBad(p.Path) {
			continue
		}
		p.Line = d.lineOf(p.Path)
		out = append(out, p)
	}
	return out
}

func (d *decoder) isBad(path string) bool {
	if d.bad[path] || d.bad[""] {
		return true
	}
	for i := len(path) - 1; i > 0; i-- {
		if (path[i] == '.' || path[i] == '[') && d.bad[path[:i]] {
			return true
		}
	}
	return false
}

// lineOf finds the line of the value at path by walking the document again
// (only problems need lines, so the walk is not paid for on success). It
// returns the line of the deepest value on the path that exists: a missing
// field gets the line of its mapping, a number inside a compact tier string
// the line of the string.
func (d *decoder) lineOf(path string) int {
	if d.root == nil || !strings.HasPrefix(path, d.rootPath) {
		return 0
	}
	n, rest := d.root, path[len(d.rootPath):]
	line := n.Line
	for steps := 0; rest != "" && steps < 1000; steps++ {
		var key string
		idx := -1
		switch {
		case rest[0] == '.':
			rest = rest[1:]
			continue
		case strings.HasPrefix(rest, `["`):
			q, err := strconv.QuotedPrefix(rest[1:])
			if err != nil || len(rest) < len(q)+2 {
				return line
			}
			key, _ = strconv.Unquote(q)
			rest = rest[len(q)+2:]
		case rest[0] == '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return line
			}
			idx, _ = strconv.Atoi(rest[1:end])
			rest = rest[end+1:]
		default:
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			key, rest = rest[:end], rest[end:]
		}
		n = child(n, key, idx, 0)
		if n == nil {
			return line
		}
		line = n.Line
	}
	return line
}

// child returns the value under key (a mapping, merge keys followed) or at
// idx (a sequence), or nil.
func child(n *yaml.Node, key string, idx int, depth int) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n == nil || depth > 20 {
		return nil
	}
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
			k := n.Content[i]
			if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
				merges = append(merges, n.Content[i+1])
			} else if k.Kind == yaml.ScalarNode && k.Value == key {
				return n.Content[i+1]
			}
		}
		for _, m := range merges {
			for m != nil && m.Kind == yaml.AliasNode {
				m = m.Alias
			}
			srcs := []*yaml.Node{m}
			if m != nil && m.Kind == yaml.SequenceNode {
				srcs = m.Content
			}
			for _, src := range srcs {
				if c := child(src, key, -1, depth+1); c != nil {
					return c
				}
			}
		}
	}
	return nil
}

// deref follows aliases and charges one value to the budget. It returns nil
// once the budget is spent.
func (d *decoder) deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n == nil || n.Kind == yaml.AliasNode {
		return nil
	}
	d.budget--
	if d.budget < 0 {
		if !d.exhausted {
			d.exhausted = true
			d.fail("", n, "document too large: its aliases expand to too many values")
		}
		return nil
	}
	return n
}

type pair struct {
	key  string
	path string
	k, v *yaml.Node
}

// mapping returns the entries of a mapping, merge keys (<<) applied. Null is
// an empty mapping. isMap selects how child paths are written: entries of a
// map (["key"]) or fields of a struct (.key). ok is false after a type error.
func (d *decoder) mapping(path string, n *yaml.Node, isMap bool) (ps []pair, ok bool) {
	n = d.deref(n)
	if n == nil {
		return nil, false
	}
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		if path == "" {
			d.fail(path, n, "the document must be a mapping (with keys %s), got %s", strings.Join(topKeys, ", "), describe(n))
		} else {
			d.fail(path, n, "must be a mapping, got %s", describe(n))
		}
		return nil, false
	}
	var seen map[string]*yaml.Node // only for large mappings; small ones scan ps
	if len(n.Content) > 32 {
		seen = make(map[string]*yaml.Node, len(n.Content)/2)
	}
	var merged []pair
	ps = make([]pair, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := d.deref(n.Content[i]), n.Content[i+1]
		if k == nil {
			return nil, false
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = d.merge1(path, v, isMap, merged)
			continue
		}
		if k.Kind != yaml.ScalarNode || isNull(k) {
			d.fail(path, k, "keys must be strings, got %s", describe(k))
			continue
		}
		p := pair{key: k.Value, k: k, v: v}
		if isMap {
			p.path = entry(path, p.key)
		} else {
			p.path = field(path, p.key)
		}
		if first := lookup(ps, seen, p.key); first != nil {
			d.fail(p.path, k, "duplicate key (first at line %d)", first.k.Line)
			continue
		}
		if seen != nil {
			seen[p.key] = k
		}
		ps = append(ps, p)
	}
	explicit := len(ps)
	for _, p := range merged {
		if lookup(ps[:explicit], seen, p.key) == nil {
			ps = append(ps, p)
		}
	}
	return ps, true
}

// lookup finds key among ps, through seen when it is not nil.
func lookup(ps []pair, seen map[string]*yaml.Node, key string) *pair {
	if seen != nil {
		if k, ok := seen[key]; ok {
			return &pair{key: key, k: k}
		}
		return nil
	}
	for i := range ps {
		if ps[i].key == key {
			return &ps[i]
		}
	}
	return nil
}

// has reports whether key is among ps.
func has(ps []pair, key string) bool {
	for _, p := range ps {
		if p.key == key {
			return true
		}
	}
	return false
}

// merge1 adds the entries of a merge key's value (a mapping or a list of
// mappings; earlier ones win) to merged.
func (d *decoder) merge1(path string, v *yaml.Node, isMap bool, merged []pair) []pair {
	v = d.deref(v)
	if v == nil {
		return merged
	}
	srcs := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		srcs = v.Content
	}
	have := map[string]bool{}
	for _, p := range merged {
		have[p.key] = true
	}
	for _, s := range srcs {
		s2 := d.deref(s)
		if s2 == nil {
			return merged
		}
		if s2.Kind != yaml.MappingNode {
			d.fail(path, s2, "a merge key (<<) takes a mapping or a list of mappings, got %s", describe(s2))
			continue
		}
		ps, _ := d.mapping(path, s2, isMap)
		for _, p := range ps {
			if !have[p.key] {
				have[p.key] = true
				merged = append(merged, p)
			}
		}
	}
	return merged
}

// list returns the items of a sequence. ok is false after a type error.
func (d *decoder) list(path string, n *yaml.Node) (items []*yaml.Node, ok bool) {
	n = d.deref(n)
	if n == nil {
		return nil, false
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(path, n, "must be a list, got %s", describe(n))
		return nil, false
	}
	return n.Content, true
}

// describe names a value's type for messages: `got the number 5`.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	switch t := n.ShortTag(); t {
	case "!!null":
		return "null"
	case "!!str":
		return fmt.Sprintf("the string %q", v)
	case "!!int", "!!float":
		return "the number " + v
	case "!!bool":
		return v
	default:
		return fmt.Sprintf("%s %q", t, v)
	}
}

// str reads a string (a YAML !!str scalar).
func (d *decoder) str(path string, n *yaml.Node) string { return d.scalar(path, n, true) }

// text reads an opaque name (a domain, a group name): any scalar but null, as
// written, so that `42` and `"42"` are the same domain.
func (d *decoder) text(path string, n *yaml.Node) string { return d.scalar(path, n, false) }

// scalar reads a scalar as written: a !!str one, or when strict is false
// any but null.
func (d *decoder) scalar(path string, n *yaml.Node, strict bool) string {
	n = d.deref(n)
	if n == nil {
		return ""
	}
	if n.Kind != yaml.ScalarNode || strict && n.ShortTag() != "!!str" || isNull(n) {
		d.fail(path, n, "must be a string, got %s", describe(n))
		return ""
	}
	return n.Value
}

// integer reads a whole number. Values beyond the int64 range are reported
// here; the real bounds are Validate's.
func (d *decoder) integer(path string, n *yaml.Node) int {
	n = d.deref(n)
	if n == nil {
		return 0
	}
	tag := ""
	if n.Kind == yaml.ScalarNode {
		tag = n.ShortTag()
	}
	if tag == "!!int" {
		if v, err := strconv.ParseInt(n.Value, 10, 64); err == nil { // the common case, without the YAML decoder
			return int(v)
		}
	}
	var x any
	if (tag != "!!int" && tag != "!!float") || n.Decode(&x) != nil {
		d.fail(path, n, "must be an integer, got %s", describe(n))
		return 0
	}
	switch v := x.(type) {
	case int:
		return v
	case int64:
		return int(v)
	case uint64:
		d.fail(path, n, "must be ≤ %d, got %s", MaxLimit, n.Value)
	case float64:
		switch {
		case math.IsNaN(v) || v != math.Trunc(v):
			d.fail(path, n, "must be a whole number, got %s", n.Value)
		case math.Abs(v) < 1e18:
			return int(v)
		case v > 0:
			d.fail(path, n, "must be ≤ %d, got %s", MaxLimit, n.Value)
		default:
			d.fail(path, n, "must be ≥ 0, got %s", n.Value)
		}
	default:
		d.fail(path, n, "must be an integer, got %s", describe(n))
	}
	return 0
}

// number reads a real number.
func (d *decoder) number(path string, n *yaml.Node) float64 {
	n = d.deref(n)
	if n == nil {
		return 0
	}
	var x any
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") && n.Decode(&x) == nil {
		switch v := x.(type) {
		case int:
			return float64(v)
		case int64:
			return float64(v)
		case uint64:
			return float64(v)
		case float64:
			return v
		}
	}
	d.fail(path, n, "must be a number, got %s", describe(n))
	return 0
}

// boolean reads true or false.
func (d *decoder) boolean(path string, n *yaml.Node) bool {
	n = d.deref(n)
	if n == nil {
		return false
	}
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		d.fail(path, n, "must be true or false, got %s", describe(n))
		return false
	}
	return b
}

// duration reads a Go duration string; a bare number is refused, since
// nobody can tell whether 30 meant seconds or milliseconds.
func (d *decoder) duration(path string, n *yaml.Node) time.Duration {
	n = d.deref(n)
	if n == nil {
		return 0
	}
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!str":
			v, msg := parseDuration(n.Value)
			if msg != "" {
				d.fail(path, n, "%s", msg)
			}
			return v
		case "!!int", "!!float":
			d.fail(path, n, "must be a duration string such as \"1s\" or \"250ms\", not a bare number (for seconds write \"%ss\")", n.Value)
			return 0
		}
	}
	d.fail(path, n, "must be a duration string such as \"1s\" or \"250ms\", got %s", describe(n))
	return 0
}

var durationSyntaxRe = regexp.MustCompile(`^[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)

// parseDuration parses a Go duration; msg is "" or the problem.
func parseDuration(s string) (time.Duration, string) {
	v, err := time.ParseDuration(s)
	if err == nil {
		return v, ""
	}
	if durationSyntaxRe.MatchString(s) && strings.ContainsAny(s, "0123456789") {
		return 0, fmt.Sprintf("must be ≤ %s (100 years), got %q", MaxDuration, s)
	}
	return 0, fmt.Sprintf("must be a duration such as \"1s\", \"250ms\" or \"24h\" (units ns, us, ms, s, m, h), got %q", s)
}
