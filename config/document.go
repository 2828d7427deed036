// The document: Parse, ParseResource and Load, reading a file's bytes into
// one tree of YAML nodes (JSON included), and its top-level sections.

package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/obol-dev/obol/internal/safefile"
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

// MaxFileSize is the largest config file ReadFile (and so Load) reads:
// 4 MiB, a thousand times a large config. A file over it is refused
// unread.
const MaxFileSize = 4 << 20

// ReadFile reads the config file at path: it follows symbolic links (a
// ConfigMap's) to a regular file of at most MaxFileSize bytes, opened
// without blocking, and refuses anything else at once (a device, a FIFO,
// a directory, a larger file), naming the path and what it is
// (package internal/safefile). Every read of the config file goes
// through it: the start, a reload, the watcher.
func ReadFile(path string) ([]byte, error) { return safefile.Read(path, MaxFileSize) }

// Load reads the file at path (ReadFile) and parses it with Parse. Errors
// name the file; a *Problems stays reachable with errors.As. Safe for
// concurrent use.
func Load(path string) (*Config, error) {
	data, err := ReadFile(path)
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

// The sections: the top-level keys and those of agent, gossip and a
// namespace. A resource's keys are the schema's (schema.go).
var (
	topKeys       = []string{"agent", "gossip", "namespaces", "resources"}
	agentKeys     = []string{"socket", "http", "state_file", "state_interval"}
	gossipKeys    = []string{"bind", "join", "sync_interval", "secret_file", "owner_from"}
	namespaceKeys = []string{"ignore_configured", "allow_unconfigured", "request_limits", "max_request_limits", "max_request_keys", "max_request_window"}
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
		case "state_file":
			a.StateFile = d.str(p.path, p.v)
		case "state_interval":
			a.StateInterval = d.duration(p.path, p.v)
			if a.StateInterval <= 0 && !d.isBad(p.path) {
				d.fail(p.path, p.v, "%v: want a positive duration such as 5s (leave the key out for the default)", a.StateInterval)
			}
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
		case "owner_from":
			g.OwnerFrom = d.integer(p.path, p.v)
			switch {
			case g.OwnerFrom == 0:
				d.fail(p.path, p.v, "0 is not a member count: leave owner_from out for the default (%d members), or give -1 (never) or a member count of at least 2", DefaultOwnerFrom)
			case g.OwnerFrom < -1 || g.OwnerFrom == 1:
				d.fail(p.path, p.v, "%d: want -1 (never) or a member count of at least 2 (left out: %d)", g.OwnerFrom, DefaultOwnerFrom)
			}
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
			case "request_limits":
				ns.RequestLimits = d.boolean(f.path, f.v)
			case "max_request_limits":
				ns.MaxRequestLimits = d.integer(f.path, f.v)
				if ns.MaxRequestLimits < 1 {
					d.fail(f.path, f.v, "must be ≥ 1, got %d (left out: %d)", ns.MaxRequestLimits, DefaultMaxRequestLimits)
				}
			case "max_request_window":
				ns.MaxRequestWindow = d.duration(f.path, f.v)
				if ns.MaxRequestWindow <= 0 {
					d.fail(f.path, f.v, "must be positive, got %v (left out: %v)", ns.MaxRequestWindow, DefaultMaxRequestWindow)
				}
			case "max_request_keys":
				ns.MaxRequestKeys = d.integer(f.path, f.v)
				if ns.MaxRequestKeys < 1 {
					d.fail(f.path, f.v, "must be ≥ 1, got %d (left out: %d)", ns.MaxRequestKeys, DefaultMaxRequestKeys)
				}
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
// their values are zero; then each key as its entry in the schema says.
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
		f := fieldOf(p.key)
		switch {
		case p.key == "kind":
		case f == nil:
			d.unknown(p, resourceKeys, "")
		case known && !f.belongs(r.Kind):
			d.fail(p.path, p.k, "%s", f.wrongKind(r.Kind))
		default:
			f.v.decode(d, p.path, p.v, r)
		}
	}
	for _, f := range schema {
		if known && f.required && f.belongs(r.Kind) && !has(ps, f.key) {
			d.fail(field(path, f.key), n, "required for kind %s%s", r.Kind, f.v.missing())
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

// override decodes the override of a resource of kind k: the fields
// overrides hold, read into a view of it as a Resource.
func (d *decoder) override(path string, n *yaml.Node, k Kind) *Override {
	o := &Override{}
	ps, ok := d.mapping(path, n, false)
	if !ok {
		return o
	}
	known := k.Valid()
	v := o.view(k)
	for _, p := range ps {
		f := fieldOf(p.key)
		switch {
		case f == nil || !f.v.overridable():
			keys, hint := unknownOverrideKey(k)
			d.unknown(p, keys, hint)
		case known && !f.inOverrides(k):
			d.fail(p.path, p.k, "%s", wrongOverrideMsg(p.key, k))
		default:
			f.v.decode(d, p.path, p.v, v)
		}
	}
	o.store(v)
	for _, key := range overrideFields[k] {
		if fieldOf(key).required && !has(ps, key) {
			d.fail(field(path, key), n, "required: an override replaces the resource's default for its domain whole")
		}
	}
	return o
}
