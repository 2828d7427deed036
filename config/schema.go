// The schema of a resource: one entry per field, from which the decoder,
// the checks and the renderer take what they know of each field (its key,
// its kinds, whether overrides hold it, whether it is required, how its
// value is read, tested, checked and rendered). Adding a field is adding
// its entry here, its struct field (with its doc comment) and its docs.

package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/obol-dev/obol/adaptive"
)

// spec is one entry of the schema: one key of a resource's mapping.
type spec struct {
	// key is the field's key in a file.
	key string
	// kinds are the kinds the field belongs to, in the order messages
	// list them; nil for a field common to every kind.
	kinds []Kind
	// strategies (kind pacer) are the strategies that read the field; nil
	// for every one.
	strategies []Strategy
	// required: a file must set the field in a resource of each of its
	// kinds, and in the overrides of those kinds when overrides hold it.
	required bool
	// v is the field's value: where it lives and how it is read, tested
	// for being set, checked on its own and rendered (values.go).
	v value
	// check adds the field's problems that depend on other fields or on
	// the kind, or is nil. It runs wherever v's check does, with the same
	// path and the same Resource.
	check func(l *problemList, path string, r *Resource)
}

// resourceFields is the schema: the fields of a resource, in the order
// the file schema lists them (key lists, messages, rendering). kind, the
// field that says which others apply, is not an entry: the walkers read it
// first.
func resourceFields() []spec {
	var (
		tiers  = []Kind{KindTiers}
		gcra   = []Kind{KindGCRA}
		copies = []Kind{KindCopies}
		adapt  = []Kind{KindAdaptive}
		pacer  = []Kind{KindPacer}
		sleeps = []Strategy{StrategyExponentialBackoff, StrategyProportionalRemaining}
	)
	return []spec{
		{key: "shadow", v: boolean(func(r *Resource) *bool { return &r.Shadow }), check: checkShadow},
		{key: "drift", v: fraction(false, fmt.Sprintf("absent means %v, 0 ships every hit at once", DefaultDrift),
			func(r *Resource) **float64 { return &r.Drift })},
		{key: "max_keys", v: notZero(strconv.Itoa(DefaultMaxKeys), func(r *Resource) *int { return &r.MaxKeys })},

		{key: "hard_limit", kinds: tiers, v: limit(func(r *Resource) **int { return &r.HardLimit }).
			override(func(o *Override) **int { return &o.HardLimit })},
		{key: "global_limit", kinds: []Kind{KindTiers, KindCopies}, v: limit(func(r *Resource) **int { return &r.GlobalLimit })},
		{key: "tiers", kinds: tiers, required: true, v: tierList(func(r *Resource) *[]Tier { return &r.Tiers }).
			override(func(o *Override) *[]Tier { return &o.Tiers })},

		{key: "burst", kinds: gcra, required: true, check: checkBurst, v: count(1, func(r *Resource) *int { return &r.Burst }).
			override(func(o *Override) *int { return &o.Burst })},
		{key: "count", kinds: gcra, required: true, v: count(1, func(r *Resource) *int { return &r.Count }).
			override(func(o *Override) *int { return &o.Count })},
		{key: "period", kinds: []Kind{KindGCRA, KindPacer}, required: true, check: checkPeriod,
			v: duration(true, func(r *Resource) *time.Duration { return &r.Period }).
				override(func(o *Override) *time.Duration { return &o.Period })},

		{key: "domain_limit", kinds: copies, v: limit(func(r *Resource) **int { return &r.DomainLimit }).
			override(func(o *Override) **int { return &o.DomainLimit })},
		{key: "groups", kinds: copies, v: groupList(func(r *Resource) *[]Group { return &r.Groups })},

		{key: "min_window", kinds: adapt, required: true, v: count(adaptive.MinMinWindow, func(r *Resource) *int { return &r.MinWindow })},
		{key: "max_window", kinds: adapt, required: true, check: checkMaxWindow,
			v: bareCount(func(r *Resource) *int { return &r.MaxWindow })},
		{key: "grow_every", kinds: adapt, v: count(0, func(r *Resource) *int { return &r.GrowEvery })},
		{key: "margin", kinds: adapt, v: count(0, func(r *Resource) *int { return &r.Margin })},
		{key: "timeout", kinds: adapt, check: checkTimeout,
			v: duration(false, func(r *Resource) *time.Duration { return &r.Timeout })},
		{key: "rules", kinds: adapt, v: enum(rulesNames, func(r *Resource) *Rules { return &r.Rules })},
		{key: "client_share", kinds: adapt, v: fraction(true, fmt.Sprintf("absent means %v: no bound per client", DefaultClientShare),
			func(r *Resource) **float64 { return &r.ClientShare })},

		{key: "strategy", kinds: pacer, v: enum(strategyNames, func(r *Resource) *Strategy { return &r.Strategy })},
		{key: "quota", kinds: pacer, required: true, v: count(1, func(r *Resource) *int { return &r.Quota })},
		{key: "min_sleep", kinds: pacer, strategies: sleeps,
			v: duration(false, func(r *Resource) *time.Duration { return &r.MinSleep })},
		{key: "multiplier", kinds: pacer, strategies: sleeps, check: checkMultiplier,
			v: number(func(r *Resource) *float64 { return &r.Multiplier })},
		{key: "jitter", kinds: pacer, v: fraction(false, fmt.Sprintf("absent means %v, 0 none", adaptive.DefaultJitter),
			func(r *Resource) **float64 { return &r.Jitter })},
		{key: "start_sleep", kinds: pacer, strategies: []Strategy{StrategyKeepReserve, StrategyProportionalRemaining},
			v: duration(false, func(r *Resource) *time.Duration { return &r.StartSleep })},

		{key: "domains", kinds: []Kind{KindTiers, KindGCRA, KindCopies},
			v: overrides(func(r *Resource) *map[string]*Override { return &r.Domains })},
	}
}

// What the walkers take from the schema, derived by init.
var (
	// schema is resourceFields(); fieldByKey indexes it.
	schema     []*spec
	fieldByKey map[string]*spec
	// overrideSchema are the fields overrides hold, in schema order.
	overrideSchema []*spec
	// resourceKeys are the keys of a resource: kind, then the schema's.
	resourceKeys []string
	// overridesField is the field of the per-domain overrides;
	// overrideKinds, its kinds, are the kinds that take overrides.
	overridesField *spec
	overrideKinds  []Kind
	// overrideFields are the keys an override of each of overrideKinds
	// sets, the required ones first; overrideKeys all of them, kind by
	// kind.
	overrideFields map[Kind][]string
	overrideKeys   []string
	// limitPaths are field(limitPath, key) for every key of a resource,
	// made once: a limit set by a request is checked on each new one, and
	// its paths are otherwise built (an allocation each) for messages it
	// rarely has.
	limitPaths map[string]string
)

// limitPath is the path of a limit set by a request, the root of its
// fields' paths ("limit.burst").
const limitPath = "limit"

// init derives the key lists from the schema. (A variable initialized with
// resourceFields() would be an initialization cycle: the overrides field
// reads, checks and renders overrides with the schema.)
func init() {
	fs := resourceFields()
	fieldByKey = make(map[string]*spec, len(fs))
	resourceKeys = []string{"kind"}
	for i := range fs {
		f := &fs[i]
		schema = append(schema, f)
		fieldByKey[f.key] = f
		resourceKeys = append(resourceKeys, f.key)
		if f.v.overridable() {
			overrideSchema = append(overrideSchema, f)
		}
		if _, ok := f.v.(*slot[map[string]*Override]); ok {
			overridesField, overrideKinds = f, f.kinds
		}
	}
	limitPaths = make(map[string]string, len(resourceKeys))
	for _, k := range resourceKeys {
		limitPaths[k] = limitPath + "." + k
	}
	overrideFields = make(map[Kind][]string, len(overrideKinds))
	for _, k := range overrideKinds {
		for _, required := range []bool{true, false} {
			for _, f := range overrideSchema {
				if f.required == required && f.belongs(k) {
					overrideFields[k] = append(overrideFields[k], f.key)
				}
			}
		}
		for _, key := range overrideFields[k] {
			if !slices.Contains(overrideKeys, key) {
				overrideKeys = append(overrideKeys, key)
			}
		}
	}
}

// fieldOf returns the entry of key, or nil.
func fieldOf(key string) *spec { return fieldByKey[key] }

// common reports whether f belongs to every kind.
func (f *spec) common() bool { return f.kinds == nil }

// belongs reports whether f is a field of a resource of kind k.
func (f *spec) belongs(k Kind) bool { return f.common() || slices.Contains(f.kinds, k) }

// inOverrides reports whether an override of kind k holds f.
func (f *spec) inOverrides(k Kind) bool {
	return f.v.overridable() && f.belongs(k) && slices.Contains(overrideKinds, k)
}

// readBy reports whether a pacer of strategy s ("" = the default) reads f.
func (f *spec) readBy(s Strategy) bool {
	if s == "" {
		s = StrategyKeepReserve
	}
	return f.strategies == nil || slices.Contains(f.strategies, s)
}

// pacerUses reports whether a pacer of strategy s ("" = the default) reads
// the field key.
func pacerUses(key string, s Strategy) bool { return fieldOf(key).readBy(s) }

// wrongKind is the problem of f set in a resource of kind k, which it does
// not belong to.
func (f *spec) wrongKind(k Kind) string {
	if f == overridesField {
		return wrongOverrideMsg(f.key, k)
	}
	names := make([]string, len(f.kinds))
	for i, x := range f.kinds {
		names[i] = string(x)
	}
	return fmt.Sprintf("not a field of kind %s (%s is for kind %s)", k, f.key, joinAnd(names))
}

// wrongOverrideMsg is the problem of the field name set in an override of
// kind k, or of overrides in a resource of a kind that takes none.
func wrongOverrideMsg(name string, k Kind) string {
	switch k {
	case KindAdaptive:
		return "kind adaptive takes no per-domain overrides"
	case KindPacer:
		return "kind pacer takes no per-domain overrides (one pacer paces every caller of the agent)"
	}
	return fmt.Sprintf("not a field of a %s override (a %s override sets %s)", k, k, joinAnd(overrideFields[k]))
}

// unknownOverrideKey is the hint of an unknown key in an override of kind
// k, and the keys to suggest from.
func unknownOverrideKey(k Kind) (keys []string, hint string) {
	keys = overrideKeys
	if k.Valid() {
		keys = overrideFields[k]
	}
	return keys, "an override sets only its kind's limit fields: " + strings.Join(keys, ", ")
}

// view returns o as a Resource of kind k that holds o's fields and nothing
// else, so that the schema's entries read, check and render an override as
// they do a resource. store copies the fields back.
func (o *Override) view(k Kind) *Resource {
	r := &Resource{Kind: k}
	for _, f := range overrideSchema {
		f.v.load(r, o)
	}
	return r
}

// store sets o's fields to those of r, a view.
func (o *Override) store(r *Resource) {
	for _, f := range overrideSchema {
		f.v.store(o, r)
	}
}
