// The document: Parse, ParseResource and Load, reading a file's bytes into
// one tree of YAML nodes (JSON included), and its top-level sections.

package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

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
