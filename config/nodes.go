// The nodes: the decoder that walks a tree of YAML nodes (through package
// yamlnode, which follows aliases and merge keys and finds duplicate keys),
// with the path of every value and the line of every problem, and its
// readers of mappings, lists and scalars.

package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/obol-dev/obol/internal/yamlnode"
)

// isNull reports whether n is the null scalar.
func isNull(n *yaml.Node) bool { return yamlnode.IsNull(n) }

// decoder walks a generic value tree into the config types, tracking the
// path of every value and collecting every problem.
type decoder struct {
	probs    []Problem
	bad      map[string]bool  // paths with a decode problem: validation stays quiet there
	root     *yaml.Node       // the document, to find the line of a path
	rootPath string           // the path of root ("" or "resource")
	walk     *yamlnode.Walker // aliases within a budget, merge keys, duplicate keys
}

// newDecoder returns a decoder for a document of size bytes, walked within
// the budget of package yamlnode (yamlnode.Budget: without aliases a
// document has fewer values than bytes, so it only stops documents whose
// aliases multiply them). Running out of it, or an alias inside the value
// it names, is a problem of the whole document (path "").
func newDecoder(root *yaml.Node, rootPath string, size int) *decoder {
	d := &decoder{bad: map[string]bool{}, root: root, rootPath: rootPath}
	d.walk = yamlnode.New(root, size, func(p yamlnode.Problem) {
		switch p.Issue {
		case yamlnode.TooLarge:
			d.fail("", p.Node, "document too large: its aliases expand to too many values")
		case yamlnode.Cycle:
			d.fail("", p.Node, "the alias *%s lies inside the value it names, which cannot be expanded", p.Node.Value)
		}
	})
	return d
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
		n = d.walk.Child(n, key, idx)
		if n == nil {
			return line
		}
		line = n.Line
	}
	return line
}

// deref follows aliases and charges one value to the budget. It returns nil
// once the budget is spent (or for an alias inside the value it names).
func (d *decoder) deref(n *yaml.Node) *yaml.Node { return d.walk.Deref(n) }

type pair struct {
	key  string
	path string
	k, v *yaml.Node
}

// mapping returns the entries of a mapping, merge keys (<<) applied and
// duplicate keys reported (yamlnode's Mapping). Null is an empty mapping.
// isMap selects how child paths are written: entries of a map (["key"]) or
// fields of a struct (.key). ok is false after a type error.
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
	childPath := func(key string) string {
		if isMap {
			return entry(path, key)
		}
		return field(path, key)
	}
	es, ok := d.walk.Mapping(n, func(p yamlnode.Problem) {
		switch p.Issue {
		case yamlnode.KeyNotString:
			d.fail(path, p.Node, "keys must be strings, got %s", describe(p.Node))
		case yamlnode.DuplicateKey:
			d.fail(childPath(p.Node.Value), p.Node, "duplicate key (first at line %d)", p.First.Line)
		case yamlnode.BadMerge:
			d.fail(path, p.Node, "a merge key (<<) takes a mapping or a list of mappings, got %s", describe(p.Node))
		case yamlnode.DeepMerge:
			d.fail(path, p.Node, "merge keys (<<) nest more than %d deep", yamlnode.MaxMergeDepth)
		}
	})
	if !ok {
		return nil, false
	}
	ps = make([]pair, len(es))
	for i, e := range es {
		ps[i] = pair{key: e.Key, path: childPath(e.Key), k: e.K, v: e.V}
	}
	return ps, true
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
func describe(n *yaml.Node) string { return yamlnode.Describe(n) }

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
	s, ok := yamlnode.Text(n, strict)
	if !ok {
		d.fail(path, n, "must be a string, got %s", describe(n))
	}
	return s
}

// integer reads a whole number. Values beyond the int64 range are reported
// here; the real bounds are Validate's.
func (d *decoder) integer(path string, n *yaml.Node) int {
	n = d.deref(n)
	if n == nil {
		return 0
	}
	v, err := yamlnode.Int(n)
	switch err {
	case nil:
		return int(v)
	case yamlnode.ErrNotWhole:
		d.fail(path, n, "must be a whole number, got %s", n.Value)
	case yamlnode.ErrTooLarge:
		d.fail(path, n, "must be ≤ %d, got %s", MaxLimit, n.Value)
	case yamlnode.ErrTooSmall:
		d.fail(path, n, "must be ≥ 0, got %s", n.Value)
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
	v, ok := yamlnode.Number(n)
	if !ok {
		d.fail(path, n, "must be a number, got %s", describe(n))
	}
	return v
}

// boolean reads true or false.
func (d *decoder) boolean(path string, n *yaml.Node) bool {
	n = d.deref(n)
	if n == nil {
		return false
	}
	b, ok := yamlnode.Bool(n, false)
	if !ok {
		d.fail(path, n, "must be true or false, got %s", describe(n))
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
