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

// requested.go is the registry of limits set by requests: a resource the
// config does not define, in a namespace with request_limits, defined by
// the limit a request carries (config.ParseLimit). The definition is part
// of the resource's name in the registry, LimitedName: the resource's name,
// a NUL byte and the limit's canonical text (config.LimitKey). So two
// callers that give one name different limits count apart, callers that
// give the same limit count together, and a peer whose counts name such a
// resource defines it from the name alone (lookup). Definitions live
// beside the unconfigured resources (Engine.dyn) and are forgotten like
// them once idle; each namespace caps its definitions and their keys
// (config.Namespace.MaxRequestLimits, MaxRequestKeys).

// definedShards is how many shards the key stores of a limit set by a
// request have: a definition's stores cost about 3 KiB rather than 45
// KiB (three stores when clustered gcra, 70), for the thousand a namespace
// may keep (a configured resource's have numShards, for the concurrency of
// a busy one).
const definedShards = 16

// limitSep separates a resource's name from its limit's canonical text in
// the registry name of a limit set by a request. No request may name a
// resource with it: the API refuses it (it is not in any name a client
// gives), and lookup makes no unconfigured resource of such a name.
const limitSep = "\x00"

// LimitedName returns the registry name of resource under the limit whose
// canonical text is key (config.LimitKey): what the engine's calls take
// to decide with a limit set by a request.
func LimitedName(resource, key string) string { return resource + limitSep + key }

// SplitLimitedName splits a registry name into the resource's name and
// its limit's canonical text; ok is false for a name that carries no
// limit.
func SplitLimitedName(name string) (resource, key string, ok bool) {
	return strings.Cut(name, limitSep)
}

// keyPool counts the keys every definition of one namespace tracks
// together, against the namespace's cap: each definition's key store adds
// its keys to it (store.pool). Shared by the engines Reload makes.
type keyPool struct {
	n   atomic.Int64
	max atomic.Int64
}

// full reports whether the pool has no room for another key.
func (p *keyPool) full() bool { return p.n.Load() >= p.max.Load() }

// pools are the key pools of the namespaces, by name.
type pools struct {
	mu sync.Mutex
	m  map[string]*keyPool
}

// of returns namespace ns's pool, made with cap max when new; the cap of
// an existing one is set to max (a reload may change it).
func (ps *pools) of(ns string, max int) *keyPool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.m == nil {
		ps.m = make(map[string]*keyPool)
	}
	p := ps.m[ns]
	if p == nil {
		p = &keyPool{}
		ps.m[ns] = p
	}
	p.max.Store(int64(max))
	return p
}

// define makes the resource of registry name, a limit set by a request,
// and adds it to e.dyn: e.dynMu is held for writing and name is not in
// e.dyn. It refuses (ErrBadLimit) a name whose limit text is not a
// canonical limit, or whose namespace does not allow limits set by
// requests, and (ErrTooMany) one past the namespace's cap of definitions.
func (e *Engine) define(name string) (*resource, error) {
	resource, key, _ := SplitLimitedName(name)
	if err := e.AllowsLimits(resource); err != nil {
		return nil, err
	}
	if _, _, ok := config.SplitName(resource); !ok || strings.Contains(key, limitSep) {
		return nil, fmt.Errorf("%w: resource: must be NAMESPACE/NAME, got %q", ErrBadRequest, resource)
	}
	nsName := namespaceOf(resource)
	ns := e.cfg.Namespaces[nsName]
	if n := e.defined[nsName]; n >= ns.MaxRequestLimits {
		return nil, fmt.Errorf("%w: namespace %q holds %d limits set by requests, its cap (namespaces.%s.max_request_limits); one is forgotten a minute after its keys have all reset", ErrTooMany, nsName, n, nsName)
	}
	lim, err := config.ParseLimitKey(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadLimit, err)
	}
	life := lim.StateLife()
	if err := e.CheckLimitLife(resource, life); err != nil {
		return nil, err
	}
	pool := e.book.pools.of(nsName, ns.MaxRequestKeys)
	r := e.buildResource(name, lim, false, definedShards)
	r.defined, r.pool, r.life = true, pool, life
	r.keyStore().setPool(pool)
	name = strings.Clone(name)
	r.name = name
	e.dyn[name] = r
	e.defined[nsName]++
	if e.att != nil {
		r.k.attach(e.att.c, name, lim, e.att)
	}
	return r, nil
}

// room refuses (ErrTooMany) a decision on a new key of r, a limit set by a
// request, while its namespace's keys are at their cap: a key it tracks
// already is decided as ever.
func (e *Engine) room(r *resource, domain string) error {
	if r == nil || r.pool == nil || !r.pool.full() {
		return nil
	}
	if r.keyStore().has(hideString(domain)) { // has keeps nothing: domain stays on the caller's stack
		return nil
	}
	ns := namespaceOf(r.name)
	return fmt.Errorf("%w: namespace %q tracks %d keys of limits set by requests, its cap (namespaces.%s.max_request_keys); a key is forgotten once its counts have reset", ErrTooMany, ns, r.pool.max.Load(), ns)
}

// forget removes the forgotten definition r from e's count of its
// namespace's, e.dynMu held for writing, and drops it.
func (e *Engine) forget(r *resource) {
	if !r.defined {
		return
	}
	ns := namespaceOf(r.name)
	if e.defined[ns]--; e.defined[ns] <= 0 {
		delete(e.defined, ns)
	}
	e.drop(r)
}

// drop takes definition r out of the cluster e is attached to, if any, and
// its keys out of its namespace's pool: a decision still in flight on r
// lands in a state nobody reads again and counts against no cap.
func (e *Engine) drop(r *resource) {
	r.keyStore().detach()
	if e.att == nil {
		return
	}
	if u, ok := e.att.c.(Unregisterer); ok {
		u.Unregister(r.name)
	}
}

// AllowsLimits returns nil when a request may set the limit of resource,
// which the config does not define: its namespace has request_limits;
// else ErrBadLimit naming the namespace.
func (e *Engine) AllowsLimits(resource string) error {
	if ns := e.cfg.Namespaces[namespaceOf(resource)]; ns == nil || !ns.RequestLimits {
		resource := strings.Clone(resource) // the message's: the caller's stays on its stack
		nsName := namespaceOf(resource)
		return fmt.Errorf("%w: namespace %q does not allow limits set by requests (set namespaces.%s.request_limits: true in the config), and %q has no config", ErrBadLimit, nsName, nsName, resource)
	}
	return nil
}

// CheckLimitLife returns nil when a limit set by a request for resource,
// whose keys keep state for life (config.Resource.StateLife), is within
// its namespace's max_request_window; else ErrBadLimit naming it. The
// caller has checked AllowsLimits.
func (e *Engine) CheckLimitLife(resource string, life time.Duration) error {
	if ns := e.cfg.Namespaces[namespaceOf(resource)]; ns != nil && life > ns.MaxRequestWindow {
		nsName := strings.Clone(namespaceOf(resource)) // the message's: the caller's stays on its stack
		return fmt.Errorf("%w: limit: a key of it keeps its state for %v, over the %v its namespace allows (namespaces.%s.max_request_window)", ErrBadLimit, life, ns.MaxRequestWindow, nsName)
	}
	return nil
}

// definedTotal is how many limits set by requests e.dyn holds, e.dynMu
// held: they do not count against MaxUnconfigured.
func (e *Engine) definedTotal() int {
	n := 0
	for _, c := range e.defined {
		n += c
	}
	return n
}

// keyStore is what requested.go needs of a rate resource's key store,
// whatever its kind's values.
type keyStore interface {
	has(domain string) bool
	detach()
	setPool(p *keyPool)
}

// keyStore returns r's key store (r is a limit set by a request: tiers or
// gcra).
func (r *resource) keyStore() keyStore {
	switch k := r.k.(type) {
	case *tiersRes:
		return k.keys
	case *gcraRes:
		return k.keys
	}
	panic(fmt.Sprintf("local: %q: a limit set by a request of kind %q", r.name, r.kind)) // config.ParseLimit makes only these two
}

// Unregisterer is implemented by a Cluster that can forget a resource
// registered with it (package reconcile's): the engine unregisters a limit
// set by a request once it forgets it, so that the cluster keeps no
// registration for each definition a client ever gave.
type Unregisterer interface {
	Unregister(name string)
}

// Resolve makes, when it is new, the resource of a registry name that
// carries a limit set by a request, and reports whether the engine knows
// the name now: a cluster calls it (through the attachment) before it
// applies a peer's count of a resource nobody registered, so that a
// definition another node made is counted here too.
func (e *Engine) Resolve(name string) bool {
	if _, _, ok := SplitLimitedName(name); !ok {
		return false
	}
	r, err := e.lookup(name, config.KindTiers)
	return err == nil && r != nil
}

// Defines reports whether the engine holds the definition of name, a
// registry name that carries a limit set by a request (LimitedName).
func (e *Engine) Defines(name string) bool {
	e.dynMu.RLock()
	_, ok := e.dyn[name]
	e.dynMu.RUnlock()
	return ok
}

// RequestLimits is one namespace's use of limits set by requests.
type RequestLimits struct {
	Namespace   string
	Definitions int // definitions kept
	Keys        int // keys their stores track together
}

// RequestLimitUsage returns, by namespace, the definitions kept and their
// keys, for the namespaces that allow limits set by requests, sorted by
// name.
func (e *Engine) RequestLimitUsage() []RequestLimits {
	var out []RequestLimits
	for name, ns := range e.cfg.Namespaces {
		if !ns.RequestLimits {
			continue
		}
		u := RequestLimits{Namespace: name}
		e.dynMu.RLock()
		u.Definitions = e.defined[name]
		e.dynMu.RUnlock()
		e.book.pools.mu.Lock()
		if p := e.book.pools.m[name]; p != nil {
			u.Keys = int(p.n.Load())
		}
		e.book.pools.mu.Unlock()
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out
}
