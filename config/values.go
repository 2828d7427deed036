// The values: the types a resource field holds (a flag, a count, a limit, a
// duration, a fraction, a number, an enum, tiers, groups, the per-domain
// overrides), each with how it is read from a file, tested for being set,
// checked on its own and rendered. The schema's entries are built from them.

package config

import (
	"slices"
	"time"

	"go.yaml.in/yaml/v3"
)

// value is a field's value as the schema's walkers see it: the decoder,
// the checks and the renderer reach the field through it, in a Resource. An
// override's fields are reached in the Resource Override.view returns.
type value interface {
	// decode reads n into the field of r (r.Kind is already read).
	decode(d *decoder, path string, n *yaml.Node, r *Resource)
	// isSet reports whether the field of r is set: a limit or a fraction
	// when present (even 0), anything else when not zero or empty.
	isSet(r *Resource) bool
	// check adds the problems of the field of r on its own terms (its
	// range, its enum); rules that look at other fields are the entry's.
	check(l *problemList, path string, r *Resource)
	// render returns what json.Marshal renders the field of r as.
	render(r *Resource) any
	// optional reports whether the field is rendered only when it is set:
	// where absent and zero differ (a limit, a fraction), false is the
	// default (a flag), or an empty map means none (the overrides).
	optional() bool
	// overridable reports whether a per-domain override holds the field too.
	overridable() bool
	// load sets the field of r to o's; store sets o's to r's (overridable
	// fields only).
	load(r *Resource, o *Override)
	store(o *Override, r *Resource)
	// missing is what the problem of a missing required field adds: how
	// to write one. "" when nothing.
	missing() string
	// addr returns a pointer to the field of r, and overrideAddr to that
	// of o (nil when overrides do not hold it): for the schema's test.
	addr(r *Resource) any
	overrideAddr(o *Override) any
}

// slot is a value of type T: where it lives in a Resource (and in an
// Override) and how a T is read, tested, checked and rendered. The
// constructors below build one for each type a field can hold.
type slot[T any] struct {
	res  func(*Resource) *T
	ovr  func(*Override) *T // nil: not a field of overrides
	read func(d *decoder, path string, n *yaml.Node, k Kind) T
	set  func(v T) bool
	rule func(l *problemList, path string, v T, k Kind) // nil: none of its own
	show func(v T, k Kind) any
	opt  bool
	how  string // for a missing required value: how to write one
}

var _ value = (*slot[int])(nil)

func (s *slot[T]) decode(d *decoder, path string, n *yaml.Node, r *Resource) {
	*s.res(r) = s.read(d, path, n, r.Kind)
}

func (s *slot[T]) isSet(r *Resource) bool { return s.set(*s.res(r)) }

func (s *slot[T]) check(l *problemList, path string, r *Resource) {
	if s.rule != nil {
		s.rule(l, path, *s.res(r), r.Kind)
	}
}

func (s *slot[T]) render(r *Resource) any         { return s.show(*s.res(r), r.Kind) }
func (s *slot[T]) optional() bool                 { return s.opt }
func (s *slot[T]) overridable() bool              { return s.ovr != nil }
func (s *slot[T]) load(r *Resource, o *Override)  { *s.res(r) = *s.ovr(o) }
func (s *slot[T]) store(o *Override, r *Resource) { *s.ovr(o) = *s.res(r) }
func (s *slot[T]) missing() string                { return s.how }
func (s *slot[T]) addr(r *Resource) any           { return s.res(r) }
func (s *slot[T]) overrideAddr(o *Override) any {
	if s.ovr == nil {
		return nil
	}
	return s.ovr(o)
}

// override makes the field one that per-domain overrides hold too, at at.
func (s *slot[T]) override(at func(*Override) *T) *slot[T] {
	s.ovr = at
	return s
}

// itself renders a value as it is.
func itself[T any](v T, _ Kind) any { return v }

// boolean is a flag; false, the default, is not rendered.
func boolean(at func(*Resource) *bool) *slot[bool] {
	return &slot[bool]{res: at, opt: true,
		read: func(d *decoder, path string, n *yaml.Node, _ Kind) bool { return d.boolean(path, n) },
		set:  func(v bool) bool { return v },
		show: itself[bool],
	}
}

// count is a whole number in [min, MaxLimit]; 0 is unset.
func count(min int, at func(*Resource) *int) *slot[int] {
	s := bareCount(at)
	s.rule = func(l *problemList, path string, v int, _ Kind) { checkInt(l, path, v, min) }
	return s
}

// notZero is a count ≥ 1 for a field whose absence (0 in the Resource)
// means a default and where a written 0 was once read as that default
// (max_keys: 0 meant 1,000,000): a 0 written in the document is refused,
// saying what to write instead.
func notZero(def string, at func(*Resource) *int) *slot[int] {
	s := count(0, at) // the rule sees 0 for absent
	s.read = func(d *decoder, path string, n *yaml.Node, _ Kind) int {
		v := d.integer(path, n)
		if v == 0 {
			d.fail(path, n, "0 is not a bound here: leave it out for the default (%s), or give at least 1", def)
			return 1 // one problem, not a second from the rule
		}
		return v
	}
	return s
}

// bareCount is a whole number whose bounds its entry's check states.
func bareCount(at func(*Resource) *int) *slot[int] {
	return &slot[int]{res: at,
		read: func(d *decoder, path string, n *yaml.Node, _ Kind) int { return d.integer(path, n) },
		set:  func(v int) bool { return v != 0 },
		show: itself[int],
	}
}

// limit is a limit: nil (absent) is no limit, a set one is in [0,
// MaxLimit], 0 granting nothing. It is rendered exactly when set, so that
// absent and 0 round-trip.
func limit(at func(*Resource) **int) *slot[*int] {
	return &slot[*int]{res: at, opt: true,
		read: func(d *decoder, path string, n *yaml.Node, _ Kind) *int { return Limit(d.integer(path, n)) },
		set:  func(v *int) bool { return v != nil },
		rule: func(l *problemList, path string, v *int, _ Kind) { checkLimit(l, path, v) },
		show: itself[*int],
	}
}

// duration is a Go duration string in [0, MaxDuration], > 0 when positive;
// 0 is unset.
func duration(positive bool, at func(*Resource) *time.Duration) *slot[time.Duration] {
	return &slot[time.Duration]{res: at,
		read: func(d *decoder, path string, n *yaml.Node, _ Kind) time.Duration { return d.duration(path, n) },
		set:  func(v time.Duration) bool { return v != 0 },
		rule: func(l *problemList, path string, v time.Duration, _ Kind) { checkDuration(l, path, v, positive) },
		show: func(v time.Duration, _ Kind) any { return v.String() },
	}
}

// fraction is a number in [0, 1], or in (0, 1] when above0; nil (absent)
// means a default, which absent says in the problem of a value out of
// range. It is rendered exactly when set.
func fraction(above0 bool, absent string, at func(*Resource) **float64) *slot[*float64] {
	interval := "[0, 1]"
	if above0 {
		interval = "(0, 1]"
	}
	return &slot[*float64]{res: at, opt: true,
		read: func(d *decoder, path string, n *yaml.Node, _ Kind) *float64 { return Fraction(d.number(path, n)) },
		set:  func(v *float64) bool { return v != nil },
		rule: func(l *problemList, path string, v *float64, _ Kind) {
			if v == nil {
				return
			}
			in := *v >= 0 && *v <= 1 // false for NaN
			if above0 {
				in = *v > 0 && *v <= 1
			}
			if !in {
				l.add(path, "must be in %s (%s), got %v", interval, absent, *v)
			}
		},
		show: itself[*float64],
	}
}

// number is a real number whose bounds its entry's check states; 0 is
// unset.
func number(at func(*Resource) *float64) *slot[float64] {
	return &slot[float64]{res: at,
		read: func(d *decoder, path string, n *yaml.Node, _ Kind) float64 { return d.number(path, n) },
		set:  func(v float64) bool { return v != 0 },
		show: itself[float64],
	}
}

// enum is one of names; "" is unset (the default).
func enum[E ~string](names []string, at func(*Resource) *E) *slot[E] {
	return &slot[E]{res: at,
		read: func(d *decoder, path string, n *yaml.Node, _ Kind) E { return E(d.str(path, n)) },
		set:  func(v E) bool { return v != "" },
		rule: func(l *problemList, path string, v E, _ Kind) {
			if v != "" && !slices.Contains(names, string(v)) {
				l.add(path, "%s", enumMsg(string(v), names))
			}
		},
		show: func(v E, _ Kind) any { return string(v) },
	}
}

// list is a list of E, read by read and checked by rule; empty is unset.
// It renders as a list, [] when empty.
func list[E any](read func(d *decoder, path string, n *yaml.Node) []E, rule func(l *problemList, path string, v []E), at func(*Resource) *[]E) *slot[[]E] {
	return &slot[[]E]{res: at,
		read: func(d *decoder, path string, n *yaml.Node, _ Kind) []E { return read(d, path, n) },
		set:  func(v []E) bool { return len(v) != 0 },
		rule: func(l *problemList, path string, v []E, _ Kind) { rule(l, path, v) },
		show: func(v []E, _ Kind) any {
			if v == nil {
				return []E{}
			}
			return v
		},
	}
}

// tierList is a tier list: a list of tier mappings or the compact string.
func tierList(at func(*Resource) *[]Tier) *slot[[]Tier] {
	s := list((*decoder).tiers, checkTiers, at)
	s.how = ` (a list of {limit, window, active, cooldown, skippable} or a compact string like "5,1,1,0"; [] rejects every request)`
	return s
}

// groupList is a list of copy groups.
func groupList(at func(*Resource) *[]Group) *slot[[]Group] {
	return list((*decoder).groups, checkGroups, at)
}

// overrides is the per-domain overrides, read, checked and rendered by
// the fields of the resource's kind that overrides hold. Empty is unset and
// not rendered.
func overrides(at func(*Resource) *map[string]*Override) *slot[map[string]*Override] {
	return &slot[map[string]*Override]{res: at, opt: true,
		read: func(d *decoder, path string, n *yaml.Node, k Kind) map[string]*Override {
			return d.overrides(path, n, k)
		},
		set: func(v map[string]*Override) bool { return len(v) != 0 },
		rule: func(l *problemList, path string, v map[string]*Override, k Kind) {
			for d, o := range v {
				p := entry(path, d)
				checkDomain(l, p, d)
				checkOverride(l, p, k, o)
			}
		},
		show: func(v map[string]*Override, k Kind) any {
			m := make(map[string]overrideOf, len(v))
			for d, o := range v {
				m[d] = overrideOf{o, k}
			}
			return m
		},
	}
}

// tierKeys and groupKeys are the keys of a tier and of a group.
var (
	tierKeys  = []string{"limit", "window", "active", "cooldown", "skippable"}
	groupKeys = []string{"name", "limit", "domains"}
)

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
