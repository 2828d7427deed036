package rls

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/obol-dev/obol/config"
	"github.com/obol-dev/obol/internal/safefile"
	"github.com/obol-dev/obol/internal/yamlnode"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// config.go reads envoyproxy/ratelimit's configuration as it is: a
// directory of YAML files, one domain each, of nested descriptors with
// their rate limits, walked by package yamlnode as obol's own config is
// (aliases and merge keys followed within a budget). Every problem of
// every file is listed (file, line, what was expected); a directory with
// any problem is refused whole.

// Unit is a rate limit's unit, as the protocol numbers it.
type Unit = rlpb.RateLimitResponse_RateLimit_Unit

// unitSeconds returns the length of unit in seconds, the divider of
// envoyproxy/ratelimit's windows (a month is 30 days, a year 365), or 0
// for an unknown unit.
func unitSeconds(u Unit) int64 {
	switch u {
	case rlpb.RateLimitResponse_RateLimit_SECOND:
		return 1
	case rlpb.RateLimitResponse_RateLimit_MINUTE:
		return 60
	case rlpb.RateLimitResponse_RateLimit_HOUR:
		return 3600
	case rlpb.RateLimitResponse_RateLimit_DAY:
		return 86400
	case rlpb.RateLimitResponse_RateLimit_WEEK:
		return 7 * 86400
	case rlpb.RateLimitResponse_RateLimit_MONTH:
		return 30 * 86400
	case rlpb.RateLimitResponse_RateLimit_YEAR:
		return 365 * 86400
	}
	return 0
}

// Limit is one descriptor's rate limit.
type Limit struct {
	// PB is the limit as replies carry it (current_limit); shared, never
	// changed after the config is built.
	PB        *rlpb.RateLimitResponse_RateLimit
	Unit      Unit
	Seconds   int64 // the unit's length
	Requests  uint32
	Unlimited bool
	Shadow    bool
	Quota     bool
	Name      string
	Replaces  []string
	Detailed  bool
	// Ext is the obol extension's resource (kind gcra or tiers), decided
	// by obol's engine instead of a fixed window; nil for a fixed window.
	Ext *config.Resource
	// extName is Ext's resource name in the engine and the cluster.
	extName string
	// Path is the descriptor's place in the config, "domain.key_value.key"
	// (the metric key of envoyproxy/ratelimit).
	Path string
	// id is the limit's index in its Config, for the metrics.
	id int
}

// node is one level of the descriptor tree.
type node struct {
	children map[string]*node // by "key" or "key_value"
	wildcard []string         // the children's keys ending in '*', in file order
	limit    *Limit
	share    bool // share_threshold: every value the wildcard matches shares one counter
	pattern  string
}

// Config is a loaded directory: the domains and their descriptor trees.
// It is immutable once built and safe for concurrent use.
type Config struct {
	domains map[string]*node
	limits  []*Limit
	files   []string
}

// Limits returns every limit of the config, in a stable order.
func (c *Config) Limits() []*Limit { return c.limits }

// Domains returns the number of domains.
func (c *Config) Domains() int { return len(c.domains) }

// Files returns the files the config was read from, sorted.
func (c *Config) Files() []string { return c.files }

// Problems is every problem of a refused config.
type Problems []string

func (p Problems) Error() string {
	return fmt.Sprintf("%d problem(s):\n  %s", len(p), strings.Join(p, "\n  "))
}

// ErrConfig is wrapped by every error of a config that cannot be used.
var ErrConfig = errors.New("rls config")

// ConfigFiles lists the files LoadDir reads in dir: every regular file (or
// symlink to one) named *.yaml or *.yml whose name does not start with a
// dot, sorted. Kubernetes' ConfigMap volumes (name -> ..data/name) are
// read through their symlinks.
func ConfigFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		p := filepath.Join(dir, n)
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// Caps of a config directory's reading (ReadDir).
const (
	// MaxFileSize is the largest config file read: 4 MiB. A larger one is
	// refused unread, and the whole directory with it.
	MaxFileSize = 4 << 20
	// MaxDirSize is the most bytes read from one directory's config files
	// together: 16 MiB. Past it the directory is refused.
	MaxDirSize = 16 << 20
)

// ReadDir reads the config files of dir (ConfigFiles), each through its
// symlinks to a regular file of at most MaxFileSize bytes, opened without
// blocking (package internal/safefile), MaxDirSize bytes at most in all.
// A file that is not regular (a FIFO, a device) or over a cap refuses the
// directory at once, naming the file; nothing of a file's content is
// quoted. Every read of the directory goes through it (LoadDir, the
// agent's change detection).
func ReadDir(dir string) ([]Source, error) {
	files, err := ConfigFiles(dir)
	if err != nil {
		return nil, err
	}
	srcs := make([]Source, 0, len(files))
	total := 0
	for _, f := range files {
		b, err := safefile.Read(f, min(MaxFileSize, int64(MaxDirSize-total)))
		if errors.Is(err, safefile.ErrTooLarge) && total > 0 {
			err = fmt.Errorf("%v (the config files of %s hold more than %d bytes in all)", err, dir, MaxDirSize)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		total += len(b)
		srcs = append(srcs, Source{Name: filepath.Base(f), Data: b})
	}
	return srcs, nil
}

// LoadDir reads (ReadDir) and parses every config file of dir.
func LoadDir(dir string) (*Config, error) {
	srcs, err := ReadDir(dir)
	if err != nil {
		return nil, err
	}
	return Parse(srcs)
}

// Source is one config file's name and content.
type Source struct {
	Name string
	Data []byte
}

// Parse builds a config from files, each holding one domain. Every problem
// is returned in one Problems error (wrapping ErrConfig).
func Parse(files []Source) (*Config, error) {
	c := &Config{domains: map[string]*node{}}
	var probs Problems
	domainFile := map[string]string{}
	for _, f := range files {
		c.files = append(c.files, f.Name)
		p := &parser{file: f.Name, c: c}
		p.file1(f.Data, domainFile)
		probs = append(probs, p.probs...)
	}
	if len(probs) > maxProblems {
		n := len(probs) - maxProblems
		probs = append(probs[:maxProblems:maxProblems], fmt.Sprintf("… and %d more problem(s)", n))
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrConfig, probs)
	}
	for i, l := range c.limits {
		l.id = i
	}
	return c, nil
}

// Bounds of a refused config's error, which is logged and shown by
// --check-config: at most maxProblems problems are listed (then how many
// more there are), each cut to maxProblemLen bytes, and a value of the
// file is quoted as a short excerpt (safefile.Excerpt), so that a large
// bad file makes a short error, and a file that is a secret (a path
// linked to a key) is not printed.
const (
	maxProblems   = 50
	maxProblemLen = 300
)

// capProblem cuts a problem's message to maxProblemLen bytes.
func capProblem(s string) string {
	if len(s) <= maxProblemLen {
		return s
	}
	cut := maxProblemLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

type parser struct {
	file  string
	c     *Config
	probs Problems
	walk  *yamlnode.Walker
	// gaveUp: the file's budget is spent (and said so).
	gaveUp bool
}

// add lists a problem at n. Once the file's budget is spent, the walk has
// given up and what it read since is incomplete: those problems are not
// listed.
func (p *parser) add(n *yaml.Node, format string, args ...any) {
	if p.gaveUp {
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	p.probs = append(p.probs, capProblem(fmt.Sprintf("%s:%d: %s", p.file, line, fmt.Sprintf(format, args...))))
}

func (p *parser) file1(data []byte, domainFile map[string]string) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		p.probs = append(p.probs, capProblem(fmt.Sprintf("%s: not YAML: %v", p.file, err)))
		return
	}
	if len(doc.Content) == 0 {
		p.probs = append(p.probs, fmt.Sprintf("%s: empty file: want a mapping with domain and descriptors", p.file))
		return
	}
	root := doc.Content[0]
	budget := 0
	p.walk = yamlnode.New(root, len(data), func(pr yamlnode.Problem) {
		switch pr.Issue {
		case yamlnode.TooLarge:
			p.add(pr.Node, "file too large: its aliases expand to more than %d values", budget)
			p.gaveUp = true
		case yamlnode.Cycle:
			p.add(pr.Node, "the alias %s lies inside the value it names, which cannot be expanded", safefile.Excerpt("*"+pr.Node.Value))
		}
	})
	budget = p.walk.Left()
	fields := p.mapping(root, "the file", map[string]bool{"domain": true, "descriptors": true})
	if fields == nil {
		return
	}
	domain := p.str(fields["domain"], "domain")
	if domain == "" {
		p.add(root, "config file cannot have empty domain")
		return
	}
	if prev, dup := domainFile[domain]; dup {
		p.add(fields["domain"], "duplicate domain %s in config file (also in %s)", safefile.Excerpt(domain), prev)
		return
	}
	domainFile[domain] = p.file
	d := &node{children: map[string]*node{}}
	p.c.domains[domain] = d
	p.descriptors(d, domain+".", fields["descriptors"])
}

// absent reports whether n (aliases followed) is missing or null.
func absent(n *yaml.Node) bool { return n == nil || yamlnode.IsNull(n) }

// mapping returns n's keys and values (aliases followed, merge keys
// applied, as envoyproxy/ratelimit's YAML library reads them), listing
// unknown keys and duplicate ones as problems; nil when n is not a
// mapping.
func (p *parser) mapping(n *yaml.Node, what string, known map[string]bool) map[string]*yaml.Node {
	if n = p.walk.Deref(n); n == nil {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.add(n, "%s: want a mapping, got %s", what, kindName(n))
		return nil
	}
	es, ok := p.entries(n, what)
	if !ok {
		return nil
	}
	out := make(map[string]*yaml.Node, len(es))
	for _, e := range es {
		if !known[e.Key] {
			p.add(e.K, "%s: unknown key %s (want one of %s)", what, safefile.Excerpt(e.Key), keyList(known))
			continue
		}
		out[e.Key] = e.V
	}
	return out
}

// entries returns the entries of the mapping n (merge keys applied),
// listing keys that are not strings, duplicate keys and bad merge keys as
// problems of what. ok is false once the budget is spent.
func (p *parser) entries(n *yaml.Node, what string) ([]yamlnode.Entry, bool) {
	return p.walk.Mapping(n, func(pr yamlnode.Problem) {
		switch pr.Issue {
		case yamlnode.KeyNotString:
			p.add(pr.Node, "%s: key is not a string", what)
		case yamlnode.DuplicateKey:
			p.add(pr.Node, "%s: key %s given twice", what, safefile.Excerpt(pr.Node.Value))
		case yamlnode.BadMerge:
			p.add(pr.Node, "%s: a merge key (<<) takes a mapping or a list of mappings, got %s", what, kindName(pr.Node))
		case yamlnode.DeepMerge:
			p.add(pr.Node, "%s: merge keys (<<) nest more than %d deep", what, yamlnode.MaxMergeDepth)
		}
	})
}

func keyList(m map[string]bool) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// kindName names n for a message: a scalar as a short quoted excerpt
// (safefile.Excerpt: a value of the file may be a secret), anything else
// by its kind (yamlnode.Describe).
func kindName(n *yaml.Node) string {
	if n != nil && n.Kind == yaml.ScalarNode {
		return safefile.Excerpt(n.Value)
	}
	return yamlnode.Describe(n)
}

// str reads a scalar's text, as written; missing or null is "".
func (p *parser) str(n *yaml.Node, what string) string {
	if n = p.walk.Deref(n); absent(n) {
		return ""
	}
	s, ok := yamlnode.Text(n, false)
	if !ok {
		p.add(n, "%s: want a string, got %s", what, kindName(n))
	}
	return s
}

// boolean reads a boolean as a Go bool decodes it (YAML 1.1's yes and no
// too, as envoyproxy/ratelimit's library reads them); missing is false.
func (p *parser) boolean(n *yaml.Node, what string) bool {
	if n = p.walk.Deref(n); n == nil {
		return false
	}
	b, ok := yamlnode.Bool(n, true)
	if !ok {
		p.add(n, "%s: want true or false, got %s", what, kindName(n))
	}
	return b
}

// uint32 reads a scalar written as a decimal integer in [0, 2³²−1];
// missing is 0.
func (p *parser) uint32(n *yaml.Node, what string) uint32 {
	if n = p.walk.Deref(n); n == nil {
		return 0
	}
	s, ok := yamlnode.Text(n, false)
	v, err := strconv.ParseUint(s, 10, 32)
	if !ok || err != nil {
		p.add(n, "%s: want an integer in [0, %d], got %s", what, uint32(math.MaxUint32), kindName(n))
		return 0
	}
	return uint32(v)
}

var descriptorKeys = map[string]bool{
	"key": true, "value": true, "descriptors": true, "rate_limit": true, "shadow_mode": true,
	"quota_mode": true, "detailed_metric": true, "value_to_metric": true, "share_threshold": true,
}

var rateLimitKeys = map[string]bool{
	"unit": true, "requests_per_unit": true, "unlimited": true, "name": true, "replaces": true, "obol": true,
}

func (p *parser) descriptors(parent *node, prefix string, list *yaml.Node) {
	if list = p.walk.Deref(list); absent(list) {
		return
	}
	if list.Kind != yaml.SequenceNode {
		p.add(list, "descriptors: want a list, got %s", kindName(list))
		return
	}
	for _, item := range list.Content {
		f := p.mapping(item, "descriptor", descriptorKeys)
		if f == nil {
			continue
		}
		key := p.str(f["key"], "key")
		if key == "" {
			p.add(item, "descriptor has empty key")
			continue
		}
		final := key
		if v := p.str(f["value"], "value"); v != "" {
			final += "_" + v
		}
		path := prefix + final
		if _, dup := parent.children[final]; dup {
			p.add(item, "duplicate descriptor composite key '%s'", path)
			continue
		}
		n := &node{children: map[string]*node{}}
		shadow := p.boolean(f["shadow_mode"], "shadow_mode")
		quota := p.boolean(f["quota_mode"], "quota_mode")
		detailed := p.boolean(f["detailed_metric"], "detailed_metric")
		if f["rate_limit"] != nil {
			n.limit = p.rateLimit(f["rate_limit"], path)
			if n.limit != nil {
				n.limit.Shadow, n.limit.Quota, n.limit.Detailed = shadow, quota, detailed
			}
		}
		p.boolean(f["value_to_metric"], "value_to_metric")
		n.share = p.boolean(f["share_threshold"], "share_threshold")
		wild := strings.HasSuffix(final, "*")
		if n.share {
			if !wild {
				p.add(item, "share_threshold can only be used with wildcard values (ending with '*'), but found key '%s'", final)
			}
			n.pattern = strings.TrimPrefix(final, key+"_")
		}
		if wild {
			parent.wildcard = append(parent.wildcard, final)
		}
		parent.children[final] = n
		p.descriptors(n, path+".", f["descriptors"])
	}
}

func (p *parser) rateLimit(n *yaml.Node, path string) *Limit {
	f := p.mapping(n, "rate_limit", rateLimitKeys)
	if f == nil {
		return nil
	}
	l := &Limit{Path: path}
	l.Unlimited = p.boolean(f["unlimited"], "unlimited")
	unitName := p.str(f["unit"], "unit")
	u, valid := rlpb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(unitName)]
	valid = valid && u != int32(rlpb.RateLimitResponse_RateLimit_UNKNOWN)
	switch {
	case l.Unlimited && valid:
		p.add(n, "should not specify rate limit unit when unlimited")
	case !l.Unlimited && !valid:
		p.add(n, "invalid rate limit unit '%s' (want second, minute, hour, day, week, month or year)", unitName) // envoyproxy's words; capProblem bounds it
	}
	l.Unit = Unit(u)
	l.Seconds = unitSeconds(l.Unit)
	l.Requests = p.uint32(f["requests_per_unit"], "requests_per_unit")
	l.Name = p.str(f["name"], "name")
	if r := p.walk.Deref(f["replaces"]); r != nil {
		if r.Kind != yaml.SequenceNode {
			p.add(r, "replaces: want a list of {name: ...}, got %s", kindName(r))
		} else {
			for _, e := range r.Content {
				ef := p.mapping(e, "replaces entry", map[string]bool{"name": true})
				if ef == nil {
					continue
				}
				name := p.str(ef["name"], "name")
				switch {
				case name == "":
					p.add(e, "should not have an empty replaces entry")
				case name == l.Name:
					p.add(e, "replaces should not contain name of same descriptor")
				default:
					l.Replaces = append(l.Replaces, name)
				}
			}
		}
	}
	if o := f["obol"]; o != nil {
		p.extension(o, l)
	}
	l.PB = &rlpb.RateLimitResponse_RateLimit{Name: l.Name, RequestsPerUnit: l.Requests, Unit: l.Unit}
	p.c.limits = append(p.c.limits, l)
	return l
}

// extension reads the obol extension of a rate_limit: an obol resource
// (kind gcra or tiers, in obol's config syntax) that decides the
// descriptor instead of a fixed window. A gcra one takes, when it leaves
// them out, count = requests_per_unit, period = the unit and burst =
// requests_per_unit.
func (p *parser) extension(n *yaml.Node, l *Limit) {
	if n = p.walk.Deref(n); n == nil {
		return
	}
	if n.Kind != yaml.MappingNode {
		p.add(n, "obol: want a mapping (an obol resource of kind gcra or tiers), got %s", kindName(n))
		return
	}
	if l.Unlimited {
		p.add(n, "obol: an unlimited rate_limit takes no obol extension")
		return
	}
	es, ok := p.entries(n, "obol")
	if !ok {
		return
	}
	has := map[string]bool{}
	kind := ""
	for _, e := range es {
		has[e.Key] = true
		if e.Key == "kind" {
			if v := p.walk.Deref(e.V); v != nil && v.Kind == yaml.ScalarNode {
				kind = v.Value
			}
		}
	}
	if kind != string(config.KindGCRA) && kind != string(config.KindTiers) {
		p.add(n, "obol.kind: want gcra or tiers, got %s", safefile.Excerpt(kind))
		return
	}
	// The resource written out on its own for config.ParseResource: the
	// entries with merge keys applied, aliases expanded (within the
	// budget), the defaults of a gcra one added.
	node := yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	for _, e := range es {
		k := *e.K
		k.Anchor = ""
		v := p.walk.Expand(e.V)
		if v == nil {
			return
		}
		node.Content = append(node.Content, &k, v)
	}
	if kind == string(config.KindGCRA) {
		for _, kv := range [][2]string{
			{"count", strconv.FormatUint(uint64(l.Requests), 10)},
			{"period", strconv.FormatInt(l.Seconds, 10) + "s"},
			{"burst", strconv.FormatUint(uint64(l.Requests), 10)},
		} {
			if !has[kv[0]] {
				node.Content = append(node.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: kv[0]}, &yaml.Node{Kind: yaml.ScalarNode, Value: kv[1]})
			}
		}
	}
	data, err := yaml.Marshal(&node)
	if err != nil {
		p.add(n, "obol: %v", err)
		return
	}
	rc, err := config.ParseResource(data)
	if err != nil {
		var ps *config.Problems
		if errors.As(err, &ps) {
			for _, pr := range *ps {
				p.add(n, "%s: %s", strings.Replace(pr.Path, "resource", "obol", 1), pr.Message)
			}
			return
		}
		p.add(n, "obol: %v", err)
		return
	}
	l.Ext = rc
	l.extName = extPrefix + escapeName(l.Path)
}

// extPrefix starts the engine and cluster names of extension limits.
const extPrefix = ResourcePrefix + "x:"

// escapeName writes '%' as "%25" and '/' as "%2F", so that the name has no
// '/' (no configured obol resource name lacks one).
func escapeName(s string) string {
	if !strings.ContainsAny(s, "%/") {
		return s
	}
	return strings.NewReplacer("%", "%25", "/", "%2F").Replace(s)
}
