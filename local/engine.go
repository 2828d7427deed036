package local

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-dev/obol/config"
)

// engine.go is the registry and the dispatch: it maps a resource's name to
// its kind's state (kindRes), and each call to that kind. A kind's rules
// live in its pure file (tiers.go, gcra.go, copies.go, ...), its storage,
// locks and recording in its _res.go file (kind.go lists them). Only this
// file asks which kind a resource is; a kind's own calls (Refund, Reserve,
// Admit, Pace) find their state through kindOf.

// MaxCopies is the most copies one call may ask for.
const MaxCopies = 1_000_000_000

// MaxUnconfigured is how many unconfigured resources (in namespaces that allow
// them) an engine records; past it, their requests are granted leniently and
// not recorded.
const MaxUnconfigured = 10_000

// Engine is the decision engine: the resource registry, the key stores and the
// copy-limited sessions. Every method takes the decision instant t; none reads
// the clock. Safe for concurrent use.
type Engine struct {
	cfg *config.Config
	res map[string]*resource

	dynMu sync.RWMutex
	dyn   map[string]*resource
	// defined counts the limits set by requests in dyn, by namespace
	// (requested.go; dynMu).
	defined map[string]int
	// next is the engine Reload made from this one, once it has: a
	// resource lookup would make here after Reload copied dyn is made in
	// next instead, so that none is left behind in a retired engine.
	next atomic.Pointer[Engine]

	book  *book // shared with the engines Reload makes from this one
	stats *Stats
	att   *attachment // its place in the cluster; nil when the node runs alone
}

// Stats counts what the engine did past its caps. Read with Load.
type Stats struct {
	// Evicted counts keys dropped, fully reset, to make room for a new key
	// at max_keys.
	Evicted atomic.Int64
	// Overflowed counts decisions and peers' counts of keys that found no
	// room at max_keys, decided on their overflow state (still limited,
	// maybe over-counted).
	Overflowed atomic.Int64
	// LenientUnrecorded counts grants to unconfigured resources past MaxUnconfigured.
	LenientUnrecorded atomic.Int64
}

// resource is one entry of the registry.
type resource struct {
	name      string
	kind      config.Kind
	shadow    bool
	unlimited bool          // unconfigured-but-allowed, or its namespace ignores config
	defined   bool          // a limit set by a request (requested.go)
	k         kindRes       // the kind's state, never nil
	idleSince int64         // unconfigured resources: when Step first found it empty (ns), 0 = in use
	pool      *keyPool      // a limit set by a request: its namespace's keys
	life      time.Duration // a limit set by a request: config.Resource.StateLife
}

// unconfiguredIdle is how long an unconfigured resource stays empty (no key
// tracked, no copy held) before Step forgets it: a client asking for ever
// new names cannot keep MaxUnconfigured of them, and a name in use keeps its
// counts.
const unconfiguredIdle = time.Minute

// New returns an engine for cfg, which must be validated and normalized
// (config.Parse does both). The engine keeps cfg and never changes it.
func New(cfg *config.Config) *Engine {
	return build(cfg, newBook(), &Stats{})
}

// build makes an engine for cfg over the given book and counters.
func build(cfg *config.Config, b *book, st *Stats) *Engine {
	e := &Engine{
		cfg:     cfg,
		res:     make(map[string]*resource, len(cfg.Resources)),
		dyn:     make(map[string]*resource),
		defined: make(map[string]int),
		book:    b,
		stats:   st,
	}
	for name, rc := range cfg.Resources {
		ns := cfg.Namespaces[namespaceOf(name)]
		e.res[name] = e.buildResource(name, rc, ns != nil && ns.IgnoreConfigured, numShards)
	}
	return e
}

// buildResource makes the registry entry of a configured resource (or of a
// limit set by a request), its key stores of shards shards. A rate
// resource whose namespace ignores its config is an unlimited tiers one; an
// adaptive or pacer one admits everything (its state has no window, no
// pacer).
func (e *Engine) buildResource(name string, rc *config.Resource, ignore bool, shards int) *resource {
	r := &resource{name: name, kind: rc.Kind, shadow: rc.Shadow, unlimited: ignore}
	switch rate := rc.Kind == config.KindTiers || rc.Kind == config.KindGCRA; {
	case rate && ignore:
		r.kind, r.k = config.KindTiers, unlimitedTiers(rc.MaxKeys, e.stats)
	case rc.Kind == config.KindTiers:
		r.k = tiersFromConfig(rc, rc.MaxKeys, shards, e.stats)
	case rc.Kind == config.KindGCRA:
		r.k = gcraFromConfig(rc, rc.MaxKeys, shards, e.stats)
	case rc.Kind == config.KindCopies:
		r.k = copiesFromConfig(name, rc, ignore, e.book)
	case rc.Kind == config.KindAdaptive:
		r.k = adaptiveFromConfig(rc, ignore)
	case rc.Kind == config.KindPacer:
		r.k = pacerFromConfig(rc, ignore)
	default:
		panic(fmt.Sprintf("local: resource %q: kind %q", name, rc.Kind)) // config.Validate knows every kind
	}
	return r
}

// Config returns the configuration in force.
func (e *Engine) Config() *config.Config { return e.cfg }

// Stats returns the engine's counters of lenient decisions (shared with the
// engines Reload makes from it).
func (e *Engine) Stats() *Stats { return e.stats }

func namespaceOf(name string) string {
	if i := strings.IndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return name
}

// limitOf is a config limit field in the engine's terms: NoLimit when
// absent, else the limit (0 grants nothing).
func limitOf(l *int) int { return config.LimitOr(l, NoLimit) }

// unconfigured returns nil when name, which has no config, may be used
// anyway (its namespace allows unconfigured resources or ignores its
// config), else ErrUnknownResource.
func (e *Engine) unconfigured(name string) error {
	ns := e.cfg.Namespaces[namespaceOf(name)]
	if ns == nil || !(ns.AllowUnconfigured || ns.IgnoreConfigured) {
		return fmt.Errorf("%w: %q has no config and its namespace %q does not allow unconfigured resources", ErrUnknownResource, name, namespaceOf(name))
	}
	return nil
}

// lookup finds a resource, creating an unconfigured one (of the kind the
// caller needs: copies, or else unlimited tiers) when its namespace allows
// it, or the one a limit set by a request names (LimitedName, define). It
// returns nil, nil when the namespace allows it but MaxUnconfigured is
// reached.
func (e *Engine) lookup(name string, kind config.Kind) (*resource, error) {
	if r, ok := e.res[name]; ok {
		return r, nil
	}
	_, _, limited := SplitLimitedName(name)
	if !limited {
		if err := e.unconfigured(name); err != nil {
			return nil, err
		}
	}
	e.dynMu.RLock()
	r, ok := e.dyn[name]
	e.dynMu.RUnlock()
	if ok {
		return r, nil
	}
	e.dynMu.Lock()
	defer e.dynMu.Unlock()
	if r, ok := e.dyn[name]; ok {
		return r, nil
	}
	if nx := e.next.Load(); nx != nil {
		return nx.lookup(name, kind) // a reload copied dyn: make it there (lock order: older engine first)
	}
	if limited {
		return e.define(name)
	}
	if len(e.dyn)-e.definedTotal() >= MaxUnconfigured {
		return nil, nil
	}
	r = &resource{name: name, kind: kind, unlimited: true}
	if kind == config.KindCopies {
		r.k = copiesFromConfig(name, &config.Resource{Kind: config.KindCopies}, true, e.book)
	} else {
		r.kind, r.k = config.KindTiers, unlimitedTiers(config.DefaultMaxKeys, e.stats)
	}
	e.dyn[strings.Clone(name)] = r
	return r, nil
}

func checkCopies(copies, minCopies int) error {
	if copies < 0 || copies > MaxCopies {
		return fmt.Errorf("%w: copies: must be an integer in [0, %d], got %d", ErrBadRequest, MaxCopies, copies)
	}
	if minCopies < 0 || minCopies > copies {
		return fmt.Errorf("%w: min_copies: must be in [0, copies=%d], got %d", ErrBadRequest, copies, minCopies)
	}
	return nil
}

// Request decides whether domain may use copies hits of resource at t, granting
// at least minCopies or nothing (0 ≤ minCopies ≤ copies; copies = 0 is a peek).
// A rejection is a Decision with Granted 0 and a nil error; errors are for
// requests that cannot be decided (unknown resource, wrong kind, bad numbers).
func (e *Engine) Request(t time.Time, resource, domain string, copies, minCopies int) (Decision, error) {
	var d Decision
	err := e.Decide(&d, t, resource, domain, copies, minCopies)
	return d, err
}

// Decide is Request writing its decision into d, which it overwrites whole:
// the hot path of the API, which keeps d in a pooled buffer and so copies no
// Decision around.
func (e *Engine) Decide(d *Decision, t time.Time, resource, domain string, copies, minCopies int) error {
	if err := checkCopies(copies, minCopies); err != nil {
		return err
	}
	r, err := e.lookup(resource, config.KindTiers)
	if err != nil {
		return err
	}
	if err := e.room(r, domain); err != nil {
		return err
	}
	if r == nil {
		e.stats.LenientUnrecorded.Add(1)
		*d = lenientDecision(config.KindTiers, copies)
		return nil
	}
	switch k := r.k.(type) {
	case *tiersRes:
		k.decide(d, domain, t.UnixMilli(), int64(copies), int64(minCopies))
	case *gcraRes:
		if err := k.decide(d, domain, t.UnixNano(), int64(copies), int64(minCopies)); err != nil {
			return err
		}
	default:
		return wrongKind(r, "request")
	}
	if r.unlimited {
		d.Lenient = true
	}
	if r.shadow && d.Granted == 0 && copies > 0 {
		d.Granted, d.Shadow = copies, true
	}
	return nil
}

// idle reports whether r tracks no key and no copy is held of it.
func (r *resource) idle() bool {
	keys, holds, peers := r.k.load()
	return keys+holds+peers == 0
}

func lenientDecision(k config.Kind, copies int) Decision {
	return Decision{Kind: k, Granted: copies, Remaining: MaxCopies, Lenient: true, HardLimit: NoLimit, GlobalLimit: NoLimit}
}

// known returns the resource of name when the engine has it (configured,
// unconfigured or a limit set by a request), making none.
func (e *Engine) known(name string) (*resource, bool) {
	if r, ok := e.res[name]; ok {
		return r, true
	}
	e.dynMu.RLock()
	r, ok := e.dyn[name]
	e.dynMu.RUnlock()
	return r, ok
}

// State reports a key's state at t without spending.
func (e *Engine) State(t time.Time, resource, domain string) (KeyState, error) {
	r, ok := e.known(resource)
	if !ok {
		ks := KeyState{Resource: resource, Domain: domain}
		if _, _, limited := SplitLimitedName(resource); limited {
			return ks, e.AllowsLimits(resource) // not defined here: nothing recorded
		}
		if _, err := e.lookup(resource, config.KindTiers); err != nil {
			return ks, err
		}
		return ks, nil // allowed but never used: nothing recorded
	}
	ks := r.k.state(domain, t)
	ks.Resource, ks.Domain, ks.Kind = resource, domain, r.kind
	return ks, nil
}

// Keys returns how many keys resource tracks now.
func (e *Engine) Keys(resource string) int {
	r, ok := e.res[resource]
	if !ok {
		return 0
	}
	keys, _, _ := r.k.load()
	return keys
}

// Step drops keys that have fully reset, ends expired sessions and
// transfers, and counts adaptive tickets outstanding for their resource's
// timeout as backoffs, as of t. The agent calls it from a ticker; tests call
// it directly.
// It visits every key: about 10 ms per million keys.
func (e *Engine) Step(t time.Time) {
	tn := t.UnixNano()
	for _, r := range e.res {
		r.k.sweep(t)
	}
	e.book.mu.Lock()
	e.book.expire(tn)
	e.book.mu.Unlock()
	e.book.tickets.mu.Lock()
	e.book.tickets.expire(tn)
	e.book.tickets.mu.Unlock()
	e.book.tickets.sweepResets(tn)
	var gone []string
	e.dynMu.RLock() // lookups go on while the keys are swept
	for name, r := range e.dyn {
		r.k.sweep(t)
		if !r.idle() {
			r.idleSince = 0 // idleSince is Step's alone
			continue
		}
		switch {
		case r.idleSince == 0:
			r.idleSince = tn
		case tn-r.idleSince >= int64(unconfiguredIdle):
			gone = append(gone, name)
		}
	}
	e.dynMu.RUnlock()
	if len(gone) > 0 && e.next.Load() == nil { // a reload's engine forgets what it keeps, not this one
		e.dynMu.Lock()
		for _, name := range gone {
			if r, ok := e.dyn[name]; ok && r.idle() { // a decision since may have used it
				e.forget(r)
				delete(e.dyn, name)
			}
		}
		e.dynMu.Unlock()
	}
}

// Usage is a resource's load, as the metrics show it.
type Usage struct {
	Resource string
	Kind     config.Kind
	Keys     int // keys tracked (tiers, gcra)
	Holds    int // copies held or staged (copies)
}

// Usage returns every configured resource's tracked keys and holds, sorted
// by name. It reads counters only; safe to call at any time.
func (e *Engine) Usage() []Usage {
	out := make([]Usage, 0, len(e.res))
	for name, r := range e.res {
		u := Usage{Resource: name, Kind: r.kind}
		u.Keys, u.Holds, _ = r.k.load()
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}
