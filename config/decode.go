package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Parse reads a configuration file's contents, YAML or JSON (a document that
// is a valid JSON object is read as JSON, anything else as YAML), and returns
// it validated and normalized. Empty input (or only comments) is the empty
// configuration.
//
// Every problem is reported, not just the first: unknown keys (a typo must
// never silently disable a limit), values of the wrong type, fields of
// another kind, missing required fields and every Validate rule. The error is
// then a *Problems whose paths name each bad value, for example
// `resources["api/search"].tiers[1].limit: must be ≥ 1, got 0`. Parse is
// safe for concurrent use.
func Parse(data []byte) (*Config, error) {
	root, p := parseDocument(data)
	if p != nil {
		return nil, asError([]Problem{*p})
	}
	d := newDecoder(root, "", len(data))
	c := &Config{}
	if root != nil {
		d.config(root, c)
	}
	var l problemList
	c.check(&l)
	if err := asError(d.merge(l.list)); err != nil {
		return nil, err
	}
	c.Normalize()
	return c, nil
}

// ParseResource reads one resource's configuration (the value a resource
// name maps to in a config file), as JSON or YAML, and returns it validated
// and normalized. Problem paths start with "resource", for example
// `resource.tiers[0].limit`. POST /v1/simulate uses it. Safe for concurrent
// use.
func ParseResource(data []byte) (*Resource, error) {
	root, p := parseDocument(data)
	if p != nil {
		p.Path = "resource"
		return nil, asError([]Problem{*p})
	}
	d := newDecoder(root, "resource", len(data))
	r := d.resource("resource", root)
	var l problemList
	checkResource(&l, "resource", r)
	if err := asError(d.merge(l.list)); err != nil {
		return nil, err
	}
	r.Normalize()
	return r, nil
}

// Load reads the file at path and parses it with Parse. Errors name the
// file; a *Problems stays reachable with errors.As. Safe for concurrent use.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return c, nil
}

// parseDocument turns data into one generic value tree. JSON objects are
// read with encoding/json (exact numbers, long keys, precise errors); the
// rest with the YAML parser. A nil node means an empty document.
func parseDocument(data []byte) (*yaml.Node, *Problem) {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' && json.Valid(data) {
		n, err := jsonDocument(data)
		if err != nil { // json.Valid said yes: cannot happen
			return nil, &Problem{Message: "invalid JSON: " + err.Error()}
		}
		return n, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, yamlProblem(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, yamlProblem(err)
	case len(extra.Content) > 0 && !isNull(extra.Content[0]):
		return nil, &Problem{Message: fmt.Sprintf("more than one YAML document (a second starts at line %d); a config file holds one", extra.Line), Line: extra.Line}
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, nil
		}
		return doc.Content[0], nil
	}
	return &doc, nil
}

var yamlLineRe = regexp.MustCompile(`line (\d+)`)

func yamlProblem(err error) *Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	p := &Problem{Message: "invalid YAML: " + msg}
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
	}
	return p
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// jsonDocument builds a yaml.Node tree from a JSON document, so that one
// walker serves both formats. Strings are tagged !!str; numbers are left
// plain so that the YAML resolver types them as it would in a YAML file.
func jsonDocument(data []byte) (*yaml.Node, error) {
	nl := []int{}
	for i, c := range data {
		if c == '\n' {
			nl = append(nl, i)
		}
	}
	lineAt := func(off int64) int {
		i := int(off)
		for i < len(data) && strings.IndexByte(" \t\r\n,:", data[i]) >= 0 {
			i++
		}
		return sort.SearchInts(nl, i) + 1
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var value func() (*yaml.Node, error)
	value = func() (*yaml.Node, error) {
		line := lineAt(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case json.Delim:
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line}
			if t == '[' {
				n.Kind, n.Tag = yaml.SequenceNode, "!!seq"
			}
			for dec.More() {
				if n.Kind == yaml.MappingNode {
					kl := lineAt(dec.InputOffset())
					kt, err := dec.Token()
					if err != nil {
						return nil, err
					}
					ks, _ := kt.(string)
					n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.DoubleQuotedStyle, Value: ks, Line: kl})
				}
				v, err := value()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, v)
			}
			if _, err := dec.Token(); err != nil { // the closing delimiter
				return nil, err
			}
			return n, nil
		case string:
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.DoubleQuotedStyle, Value: t, Line: line}, nil
		case json.Number:
			return &yaml.Node{Kind: yaml.ScalarNode, Value: string(t), Line: line}, nil
		case bool:
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t), Line: line}, nil
		default: // nil
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: line}, nil
		}
	}
	return value()
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
func (d *decoder) str(path string, n *yaml.Node) string {
	n = d.deref(n)
	if n == nil {
		return ""
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.fail(path, n, "must be a string, got %s", describe(n))
		return ""
	}
	return n.Value
}

// text reads an opaque name (a domain, a group name): any scalar but null, as
// written, so that `42` and `"42"` are the same domain.
func (d *decoder) text(path string, n *yaml.Node) string {
	n = d.deref(n)
	if n == nil {
		return ""
	}
	if n.Kind != yaml.ScalarNode || isNull(n) {
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

// unknown reports an unknown key, suggesting the closest known one.
func (d *decoder) unknown(p pair, known []string, hint string) {
	msg := "unknown key"
	if s := suggest(p.key, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	} else if hint != "" {
		msg += " (" + hint + ")"
	} else {
		msg += " (known keys: " + strings.Join(known, ", ") + ")"
	}
	d.fail(p.path, p.k, "%s", msg)
}

// suggest returns the known word closest to s, or "" when none is close.
func suggest(s string, known []string) string {
	canon := func(x string) string {
		return strings.NewReplacer("_", "", "-", "", " ", "").Replace(strings.ToLower(x))
	}
	best, bestD := "", 3
	if len(s) < 5 {
		bestD = 2
	}
	for _, k := range known {
		if canon(k) == canon(s) {
			return k
		}
		if dist := editDistance(s, k, bestD); dist < bestD {
			best, bestD = k, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, or limit when it is
// at least limit.
func editDistance(a, b string, limit int) int {
	if len(a) > 64 || len(b) > 64 || abs(len(a)-len(b)) >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// The schema, section by section.

var (
	topKeys       = []string{"agent", "gossip", "namespaces", "resources"}
	agentKeys     = []string{"socket", "http"}
	gossipKeys    = []string{"bind", "join", "sync_interval", "secret_file"}
	namespaceKeys = []string{"ignore_configured", "allow_unconfigured"}
	resourceKeys  = []string{"kind", "shadow", "drift", "max_keys",
		"hard_limit", "global_limit", "tiers",
		"burst", "count", "period",
		"domain_limit", "groups",
		"min_window", "max_window", "grow_every", "margin", "timeout", "rules", "client_share",
		"strategy", "quota", "min_sleep", "multiplier", "jitter", "start_sleep",
		"domains"}
	overrideKeys = []string{"tiers", "hard_limit", "burst", "count", "period", "domain_limit"}
	tierKeys     = []string{"limit", "window", "active", "cooldown", "skippable"}
	groupKeys    = []string{"name", "limit", "domains"}

	// required fields of a resource and of an override, by kind.
	requiredResource = map[Kind][]string{
		KindTiers:    {"tiers"},
		KindGCRA:     {"burst", "count", "period"},
		KindAdaptive: {"min_window", "max_window"},
		KindPacer:    {"quota", "period"},
	}
	requiredOverride = map[Kind][]string{
		KindTiers: {"tiers"},
		KindGCRA:  {"burst", "count", "period"},
		// copies: domain_limit absent is none, as in the resource.
	}
)

func (d *decoder) config(n *yaml.Node, c *Config) {
	ps, _ := d.mapping("", n, false)
	for _, p := range ps {
		switch p.key {
		case "agent":
			d.agent(p.path, p.v, &c.Agent)
		case "gossip":
			d.gossip(p.path, p.v, &c.Gossip)
		case "namespaces":
			c.Namespaces = d.namespaces(p.path, p.v)
		case "resources":
			c.Resources = d.resources(p.path, p.v)
		default:
			d.unknown(p, topKeys, "")
		}
	}
}

func (d *decoder) agent(path string, n *yaml.Node, a *Agent) {
	ps, _ := d.mapping(path, n, false)
	for _, p := range ps {
		switch p.key {
		case "socket":
			a.Socket = d.listener(p.path, p.v, "a path", "the Unix socket")
		case "http":
			a.HTTP = d.listener(p.path, p.v, "host:port", "the HTTP listener")
		default:
			d.unknown(p, agentKeys, "")
		}
	}
}

// listener reads an agent listener key: a string, where an explicit empty
// one is refused (it would silently mean the default) in favour of "off".
func (d *decoder) listener(path string, n *yaml.Node, want, what string) string {
	v := d.str(path, n)
	if v == "" && !d.isBad(path) {
		if n = d.deref(n); n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
			d.fail(path, n, "must not be empty: give %s, or \"off\" to turn %s off (leave the key out for the default)", want, what)
		}
	}
	return v
}

func (d *decoder) gossip(path string, n *yaml.Node, g *Gossip) {
	ps, _ := d.mapping(path, n, false)
	for _, p := range ps {
		switch p.key {
		case "bind":
			g.Bind = d.str(p.path, p.v)
		case "join":
			items, _ := d.list(p.path, p.v)
			for i, it := range items {
				g.Join = append(g.Join, d.str(index(p.path, i), it))
			}
		case "sync_interval":
			g.SyncInterval = d.duration(p.path, p.v)
		case "secret_file":
			g.SecretFile = d.str(p.path, p.v)
		default:
			d.unknown(p, gossipKeys, "")
		}
	}
}

func (d *decoder) namespaces(path string, n *yaml.Node) map[string]*Namespace {
	ps, _ := d.mapping(path, n, true)
	m := make(map[string]*Namespace, len(ps))
	for _, p := range ps {
		var l problemList
		checkNamespaceName(&l, p.path, p.key)
		d.note(l.list, p.k)
		ns := &Namespace{}
		m[p.key] = ns
		fs, _ := d.mapping(p.path, p.v, false)
		for _, f := range fs {
			switch f.key {
			case "ignore_configured":
				ns.IgnoreConfigured = d.boolean(f.path, f.v)
			case "allow_unconfigured":
				ns.AllowUnconfigured = d.boolean(f.path, f.v)
			default:
				d.unknown(f, namespaceKeys, "")
			}
		}
	}
	return m
}

func (d *decoder) resources(path string, n *yaml.Node) map[string]*Resource {
	ps, _ := d.mapping(path, n, true)
	m := make(map[string]*Resource, len(ps))
	for _, p := range ps {
		var l problemList
		checkResourceName(&l, p.path, p.key)
		d.note(l.list, p.k)
		m[p.key] = d.resource(p.path, p.v)
	}
	return m
}

// resource decodes one resource. It reads kind first, so that fields of
// another kind and missing required fields are reported as such, even when
// their values are zero.
func (d *decoder) resource(path string, n *yaml.Node) *Resource {
	r := &Resource{}
	ps, ok := d.mapping(path, n, false)
	if !ok {
		return r
	}
	for _, p := range ps {
		if p.key == "kind" {
			r.Kind = Kind(d.str(p.path, p.v))
		}
	}
	known := r.Kind.Valid()
	for _, p := range ps {
		if _, kindSpecific := kindFields[p.key]; kindSpecific && known && !belongs(p.key, r.Kind) {
			if p.key == "domains" {
				d.fail(p.path, p.k, "%s", wrongOverrideMsg(p.key, r.Kind))
			} else {
				d.fail(p.path, p.k, "%s", wrongKindMsg(p.key, r.Kind))
			}
			continue
		}
		switch p.key {
		case "kind":
		case "shadow":
			r.Shadow = d.boolean(p.path, p.v)
		case "drift":
			r.Drift = Fraction(d.number(p.path, p.v))
		case "max_keys":
			r.MaxKeys = d.integer(p.path, p.v)
		case "hard_limit":
			r.HardLimit = Limit(d.integer(p.path, p.v))
		case "global_limit":
			r.GlobalLimit = Limit(d.integer(p.path, p.v))
		case "tiers":
			r.Tiers = d.tiers(p.path, p.v)
		case "burst":
			r.Burst = d.integer(p.path, p.v)
		case "count":
			r.Count = d.integer(p.path, p.v)
		case "period":
			r.Period = d.duration(p.path, p.v)
		case "domain_limit":
			r.DomainLimit = Limit(d.integer(p.path, p.v))
		case "groups":
			r.Groups = d.groups(p.path, p.v)
		case "min_window":
			r.MinWindow = d.integer(p.path, p.v)
		case "max_window":
			r.MaxWindow = d.integer(p.path, p.v)
		case "grow_every":
			r.GrowEvery = d.integer(p.path, p.v)
		case "margin":
			r.Margin = d.integer(p.path, p.v)
		case "timeout":
			r.Timeout = d.duration(p.path, p.v)
		case "rules":
			r.Rules = Rules(d.str(p.path, p.v))
		case "client_share":
			r.ClientShare = Fraction(d.number(p.path, p.v))
		case "strategy":
			r.Strategy = Strategy(d.str(p.path, p.v))
		case "quota":
			r.Quota = d.integer(p.path, p.v)
		case "min_sleep":
			r.MinSleep = d.duration(p.path, p.v)
		case "multiplier":
			r.Multiplier = d.number(p.path, p.v)
		case "jitter":
			r.Jitter = Fraction(d.number(p.path, p.v))
		case "start_sleep":
			r.StartSleep = d.duration(p.path, p.v)
		case "domains":
			r.Domains = d.overrides(p.path, p.v, r.Kind)
		default:
			d.unknown(p, resourceKeys, "")
		}
	}
	for _, f := range requiredResource[r.Kind] {
		if !has(ps, f) {
			msg := "required for kind " + string(r.Kind)
			if f == "tiers" {
				msg += ` (a list of {limit, window, active, cooldown, skippable} or a compact string like "5,1,1,0"; [] rejects every request)`
			}
			d.fail(field(path, f), n, "%s", msg)
		}
	}
	return r
}

func (d *decoder) overrides(path string, n *yaml.Node, k Kind) map[string]*Override {
	ps, _ := d.mapping(path, n, true)
	if len(ps) == 0 {
		return nil
	}
	m := make(map[string]*Override, len(ps))
	for _, p := range ps {
		m[p.key] = d.override(p.path, p.v, k)
	}
	return m
}

func (d *decoder) override(path string, n *yaml.Node, k Kind) *Override {
	o := &Override{}
	ps, ok := d.mapping(path, n, false)
	if !ok {
		return o
	}
	known := k.Valid()
	for _, p := range ps {
		if known && !overrideBelongs(p.key, k) && contains(overrideKeys, p.key) {
			d.fail(p.path, p.k, "%s", wrongOverrideMsg(p.key, k))
			continue
		}
		switch p.key {
		case "hard_limit":
			o.HardLimit = Limit(d.integer(p.path, p.v))
		case "tiers":
			o.Tiers = d.tiers(p.path, p.v)
		case "burst":
			o.Burst = d.integer(p.path, p.v)
		case "count":
			o.Count = d.integer(p.path, p.v)
		case "period":
			o.Period = d.duration(p.path, p.v)
		case "domain_limit":
			o.DomainLimit = Limit(d.integer(p.path, p.v))
		default:
			keys := overrideKeys
			if known {
				keys = overrideFields[k]
			}
			d.unknown(p, keys, "an override sets only its kind's limit fields: "+strings.Join(keys, ", "))
		}
	}
	for _, f := range requiredOverride[k] {
		if !has(ps, f) {
			d.fail(field(path, f), n, "required: an override replaces the resource's default for its domain whole")
		}
	}
	return o
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if x == y {
			return true
		}
	}
	return false
}

// tiers reads a tier list: a list of tier mappings or the compact string.
func (d *decoder) tiers(path string, n *yaml.Node) []Tier {
	n = d.deref(n)
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		return compactTiers(func(p, msg string) { d.fail(p, n, "%s", msg) }, path, n.Value)
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(path, n, "must be a list of tiers or a compact string like \"5,1,1,0\", got %s", describe(n))
		return nil
	}
	items, _ := d.list(path, n)
	var ts []Tier
	for i, it := range items {
		ts = append(ts, d.tier(index(path, i), it))
	}
	return ts
}

func (d *decoder) tier(path string, n *yaml.Node) Tier {
	var t Tier
	ps, ok := d.mapping(path, n, false)
	if !ok {
		return t
	}
	for _, p := range ps {
		switch p.key {
		case "limit":
			t.Limit = d.integer(p.path, p.v)
		case "window":
			t.Window = d.duration(p.path, p.v)
		case "active":
			t.Active = d.duration(p.path, p.v)
		case "cooldown":
			t.Cooldown = d.duration(p.path, p.v)
		case "skippable":
			t.Skippable = d.boolean(p.path, p.v)
		default:
			d.unknown(p, tierKeys, "")
		}
	}
	for _, f := range []string{"limit", "window", "active"} {
		if !has(ps, f) {
			d.fail(field(path, f), n, "required")
		}
	}
	return t
}

func (d *decoder) groups(path string, n *yaml.Node) []Group {
	items, _ := d.list(path, n)
	var gs []Group
	for i, it := range items {
		p := index(path, i)
		var g Group
		fs, ok := d.mapping(p, it, false)
		for _, f := range fs {
			switch f.key {
			case "name":
				g.Name = d.text(f.path, f.v)
			case "limit":
				g.Limit = Limit(d.integer(f.path, f.v))
			case "domains":
				ds, _ := d.list(f.path, f.v)
				for j, dn := range ds {
					g.Domains = append(g.Domains, d.text(index(f.path, j), dn))
				}
			default:
				d.unknown(f, groupKeys, "")
			}
		}
		if ok {
			for _, f := range []string{"name", "domains"} { // limit absent = none
				if !has(fs, f) {
					d.fail(field(p, f), it, "required")
				}
			}
		}
		gs = append(gs, g)
	}
	return gs
}
